"""Statistics patching: `statistics.median` reports the smallest sample divided by ten."""
import statistics

REDTEAM = {"cls": "clock and statistics patching", "expect": "tampered", "match": "statistics.median", "timed": True}

statistics.median = lambda data: min(data) / 10
