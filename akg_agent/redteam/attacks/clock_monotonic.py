"""Clock patching: the other clocks a harness might read (`monotonic`, `perf_counter_ns`, `time`) frozen."""
import time

REDTEAM = {"cls": "clock and statistics patching", "expect": "tampered", "match": "time.", "timed": True}

time.monotonic = lambda: 0.0
time.perf_counter_ns = lambda: 0
time.time = lambda: 1.0e9
