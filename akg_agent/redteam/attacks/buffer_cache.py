"""Cached answers across calls, keyed by buffer: the answer kept per input address and returned whenever the
same buffers come again. A harness that times on a few fixed input sets (as every harness does) then times
a lookup; the checks, on fresh inputs each, see a hit only where the allocator hands a freed buffer back
(a replay). The timer's inputs take other values from turn to turn in the same buffers: a stale answer."""
import torch

REDTEAM = {"cls": "cached or memorised answers across seeds and calls", "expect": ["replayed", "timed_output"],
           "match": "output 0", "timed": True}

_Honest = globals()["ModelNew"]


class ModelNew(_Honest):
    def forward(self, *args):
        key = tuple((a.data_ptr(), tuple(a.shape)) for a in args if isinstance(a, torch.Tensor))
        cache = self.__dict__.setdefault("_by_buffer", {})
        if key not in cache:
            cache[key] = super().forward(*args)
        return cache[key]
