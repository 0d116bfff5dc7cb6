"""Benchmark metrics: fast_p and geometric-mean speedups."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

FAST_P = (0.0, 1.0, 1.5, 2.0)


def fast_p(records: Sequence[dict[str, Any]], baseline: str, p: float) -> float:
    """Fraction of all problems whose solution is correct and more than p times faster than the
    baseline (fast_0 is the fraction correct)."""
    if not records:
        return 0.0
    hits = 0
    for r in records:
        if not r.get("correct"):
            continue
        s = r.get("speedup", {}).get(baseline)
        if p == 0.0 or (s is not None and s > p):
            hits += 1
    return hits / len(records)


def geomean(values: Sequence[float]) -> float | None:
    vals = [v for v in values if v and v > 0 and math.isfinite(v)]
    return math.exp(sum(math.log(v) for v in vals) / len(vals)) if vals else None


def slower_beyond_noise(records: Sequence[dict[str, Any]], baseline: str) -> list[str]:
    """Correct problems slower than the baseline in at least three turns of four (the upper quartile of
    their paired speedups below 1.0) and, where the row has the run's A/A control (eager's module and a
    copy of it, timed in the same turns), further below 1.0 than those two identical modules fall apart
    either way: which of them reads as the faster is chance (a copy's weights lie elsewhere in memory).
    A median below 1.0 inside those spreads is the host's noise."""
    out = []
    for r in records:
        q = r.get("speedup_quartiles", {}).get(baseline)
        if not r.get("correct") or not q or q[1] >= 1.0:
            continue
        noise = r.get("noise_quartiles")
        if noise is None or r["speedup"][baseline] < min(noise[0], 1.0 / noise[1]):
            out.append(r["problem"])
    return out


def summarize(records: Sequence[dict[str, Any]], baselines: Sequence[str]) -> dict[str, Any]:
    out: dict[str, Any] = {"problems": len(records), "correct": sum(1 for r in records if r.get("correct"))}
    for b in baselines:
        out[f"fast_p_vs_{b}"] = {str(p): fast_p(records, b, p) for p in FAST_P}
        out[f"geomean_speedup_vs_{b}"] = geomean([r["speedup"][b] for r in records
                                                   if r.get("correct") and b in r.get("speedup", {})])
        out[f"slower_beyond_noise_vs_{b}"] = slower_beyond_noise(records, b)
    sol = [r["sol_fraction"] for r in records if r.get("correct") and r.get("sol_fraction")]
    out["geomean_sol_fraction"] = geomean(sol)
    guards = sorted(r["guard_us"] for r in records if r.get("guard_us") is not None)
    if guards:  # the written modules' input checks, host time per call
        out["guard_us_median"], out["guard_us_max"] = guards[len(guards) // 2], guards[-1]
    return out
