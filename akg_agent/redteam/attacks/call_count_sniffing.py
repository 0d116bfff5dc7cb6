"""Environment sniffing by count: honest for the first calls (a checker's few), then the last answer
returned for every call after (a timer's many)."""
REDTEAM = {"cls": "environment sniffing that behaves differently when timed", "expect": "timed_output",
           "match": "differs from the reference", "timed": True, "params": {"HONEST_CALLS": [10]}}

_Honest = globals()["ModelNew"]


class ModelNew(_Honest):
    def forward(self, *args):
        self._calls = getattr(self, "_calls", 0) + 1
        if self._calls > globals()["HONEST_CALLS"]:
            return self._out
        self._out = super().forward(*args)
        return self._out
