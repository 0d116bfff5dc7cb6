"""Uninitialised memory: forward allocates its output and writes nothing, hoping the allocator hands back
a block that still holds a correct answer."""
import torch

REDTEAM = {"cls": "uninitialised or recycled memory", "expect": "stale_memory", "match": "uninitialised",
           "timed": False}

_Honest = globals()["ModelNew"]


class ModelNew(_Honest):
    def forward(self, *args):
        if not hasattr(self, "_like"):
            self._like = super().forward(*args)
        return torch.empty_like(self._like)
