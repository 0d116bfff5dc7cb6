"""Reading the reference's result from the heap: forward scans the garbage collector's objects for a float
tensor of the answer's shape that is not one of its inputs (the reference's output, or its copy kept for
the comparison) and returns a copy, computing nothing. The candidate runs before the reference, so what it
finds is some other tensor: a wrong answer, or (where the verifier's re-run finds another) a changing one."""
import gc

import torch

REDTEAM = {"cls": "reading the reference's result", "expect": ["wrong_values", "stale_memory"],
           "match": "output 0", "timed": False}

_Honest = globals()["ModelNew"]


class ModelNew(_Honest):
    def forward(self, *args):
        if not hasattr(self, "_shape"):
            self._shape = super().forward(*args).shape
        mine = {id(a) for a in args}
        for o in gc.get_objects():
            if isinstance(o, torch.Tensor) and id(o) not in mine and o.shape == self._shape \
                    and o.is_floating_point() and o is not getattr(self, "_last", None):
                self._last = o.detach().clone()
                return self._last
        return torch.zeros(self._shape, device=args[0].device)
