"""A probe answered from the cache: where the inputs look like a precision probe's (every fp32 value exact
in bfloat16, as a sensitivity check's base set is), forward returns the last answer it gave. A verifier
that regresses the probe's answers without checking their values reads the stale answer as a slope and
names the wrong cause; the cache key by buffer address hits the same way when the allocator hands back
a freed buffer, so a run's cause would depend on the allocator."""
import torch

REDTEAM = {"cls": "cached or memorised answers across seeds and calls", "expect": "replayed",
           "match": "output 0 repeats an earlier answer", "timed": False}

_Honest = globals()["ModelNew"]


def _probe(args):
    xs = [a for a in args if isinstance(a, torch.Tensor) and a.dtype == torch.float32]
    return bool(xs) and all(bool((a == a.to(torch.bfloat16).to(torch.float32)).all()) for a in xs)


class ModelNew(_Honest):
    def forward(self, *args):
        if _probe(args) and hasattr(self, "_last"):
            return self._last
        self._last = super().forward(*args)
        return self._last
