"""Cached answer across calls: the first call's result returned for every later input."""
REDTEAM = {"cls": "cached or memorised answers across seeds and calls", "expect": "replayed",
           "match": "repeats an earlier answer", "timed": False}

_Honest = globals()["ModelNew"]


class ModelNew(_Honest):
    def forward(self, *args):
        if not hasattr(self, "_cache"):
            self._cache = super().forward(*args)
        return self._cache
