"""Clock patching by substitution: `sys.modules['time']` replaced by a module whose clock runs slow, so
that any later `import time` gets it."""
import sys
import types

REDTEAM = {"cls": "clock and statistics patching", "expect": "tampered", "match": "sys.modules['time']",
           "timed": True}

_real = sys.modules["time"]
_fake = types.ModuleType("time")
_fake.__dict__.update(_real.__dict__)
_fake.perf_counter = lambda: _real.perf_counter() / 10
sys.modules["time"] = _fake
