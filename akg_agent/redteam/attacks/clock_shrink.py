"""Clock patching: every reading of `time.perf_counter` divided by FACTOR (ratios stay honest, absolute
figures shrink)."""
import time

REDTEAM = {"cls": "clock and statistics patching", "expect": "tampered", "match": "time.perf_counter", "timed": True,
           "params": {"FACTOR": [100.0, 3.0]}}

_real = time.perf_counter
time.perf_counter = lambda: _real() / globals()["FACTOR"]
