"""Lazy output: forward returns a tensor subclass that computes only when it is read (after the timer has
stopped), wrapping the honest answer."""
import torch

REDTEAM = {"cls": "lazy or deferred outputs", "expect": "output_type", "match": "not a plain torch.Tensor",
           "timed": False}

_Honest = globals()["ModelNew"]


class _Lazy(torch.Tensor):
    pass


class ModelNew(_Honest):
    def forward(self, *args):
        out = super().forward(*args)
        if isinstance(out, torch.Tensor):
            return out.as_subclass(_Lazy)
        return tuple(o.as_subclass(_Lazy) for o in out)
