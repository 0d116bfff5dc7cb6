"""Whether a timed verdict's figures can be believed: the parent's clock against the worker's, and a
speedup past a bound timed again in a fresh process.

The worker's clocks live in the candidate's process; the parent's do not. Each timed run ends with
windows of back-to-back candidate calls that both clocks time (`window.run`); where the parent's clock
saw far more time pass in every window, the worker's clocks were tampered with, below the reach of the
integrity check if need be. A speedup past `PLAUSIBLE_SPEEDUP` over eager (KernelBench v0.1's
bound), or past a speed-of-light the verifier does not enforce (an estimated bandwidth), is timed again
in a fresh interpreter (not forked from the server that ran the first), the candidate alone first, then
the baselines, then the candidate again; the verdict stands where a re-timing reaches the first within noise."""

from __future__ import annotations

from typing import Any

PLAUSIBLE_SPEEDUP = 10.0
# the parent's clock may read a window longer than the worker's clock by this factor plus WINDOW_SLACK_S (its
# reading thread wakes late on a busy host) before the clocks disagree
WINDOW_FACTOR = 1.5
WINDOW_SLACK_S = 0.03
# a speedup past the bound holds where, timed again, it is at least the first run's divided by this factor
# (or by the square of the trials' spread, where that is larger): a busy host moves speedups by a factor of
# two, a module that is fast only in the process that first ran it by far more
AGREE_FACTOR = 4.0


def clock_disagrees(details: dict[str, Any]) -> str | None:
    """A one-line reason where, in every window, the parent's clock saw far more time pass than the
    worker's clock did (the worker's clock was tampered with), else None."""
    window = ((details.get("timing") or {}).get("candidate") or {}).get("window")
    parent = details.get("window_parent_s") or {}
    pairs = [(parent[str(w)], mine) for w, mine in enumerate((window or {}).get("worker_s", [])) if str(w) in parent]
    if not pairs or any(p <= WINDOW_FACTOR * mine + WINDOW_SLACK_S for p, mine in pairs):
        return None
    p, mine = min(pairs)
    return (f"{window['calls']} calls took {p * 1e3:.4g} ms by the parent's clock, {mine * 1e3:.4g} ms by the "
            "clock in the candidate's process: its clocks were tampered with")


def speedup(details: dict[str, Any], name: str = "candidate") -> float | None:
    t = details.get("timing") or {}
    eager, cand = (t.get("eager") or {}).get("median_s"), (t.get(name) or {}).get("median_s")
    return eager / cand if eager and cand else None


def needs_retime(details: dict[str, Any], sol_s: float | None) -> str | None:
    """Why this timed verdict is timed again (None: it is not): a speedup past the bound, or a run
    faster than a speed-of-light that was not enforced."""
    s = speedup(details)
    if s is not None and s > PLAUSIBLE_SPEEDUP:
        return f"{s:.3g}x eager, past the {PLAUSIBLE_SPEEDUP:g}x bound"
    cand = ((details.get("timing") or {}).get("candidate") or {}).get("median_s")
    if sol_s and cand and cand < sol_s:
        return f"{cand * 1e3:.4g} ms, under the estimated speed-of-light {sol_s * 1e3:.4g} ms"
    return None


def _spread(t: dict[str, Any]) -> float:
    trials = sorted(t.get("trials_s") or ())
    if len(trials) < 4 or trials[len(trials) // 4] <= 0:
        return 1.0
    return trials[3 * len(trials) // 4] / trials[len(trials) // 4]


def _noise(first: dict[str, Any], again: dict[str, Any]) -> float:
    t0, t1 = first.get("timing") or {}, again.get("timing") or {}
    return max(AGREE_FACTOR, max(_spread(t) for t in (t0.get("candidate", {}), t1.get("candidate", {}),
                                                       t1.get("candidate_last", {}), t1.get("eager", {}))) ** 2)


def _median(details: dict[str, Any], name: str) -> float | None:
    return ((details.get("timing") or {}).get(name) or {}).get("median_s")


def retime_disagrees(first: dict[str, Any], again: dict[str, Any]) -> str | None:
    """A one-line reason where the candidate, timed again in a fresh process (first and last), is slower than
    in the first timing beyond noise in both positions, else None. The candidate's own time is compared,
    not the speedup: a baseline that ran slow in the first process (a busy host) is the baseline's anomaly,
    settled by `settled_eager`, not the candidate's."""
    times = {"first run": _median(first, "candidate"), "fresh process, candidate first": _median(again, "candidate"),
             "fresh process, candidate last": _median(again, "candidate_last")}
    if any(not v for v in times.values()):
        missing = ", ".join(k for k, v in times.items() if not v)
        return f"no candidate time to compare in the re-timing ({missing})"
    noise = _noise(first, again)
    # the better of the two positions: on a small loaded host the block right after eager's can be slowed
    # by eager's OpenMP threads still spinning
    claimed, held = times["first run"], min(v for k, v in times.items() if k != "first run")
    if held > noise * claimed:
        said = ", ".join(f"{k} {v * 1e3:.4g} ms" for k, v in times.items())
        return (f"the candidate is slower when timed again ({said}; noise allows {noise:.2g}x): the speedup over "
                "eager does not hold")
    return None


def settled_eager(first: dict[str, Any], again: dict[str, Any]) -> dict[str, Any] | None:
    """The re-timing's eager figure where the first run's eager was slower beyond noise (the first figure
    is then not a speedup to report), else None."""
    e0, e1 = _median(first, "eager"), _median(again, "eager")
    if not e0 or not e1 or e0 <= _noise(first, again) * e1:
        return None
    return (again.get("timing") or {}).get("eager")


def candidate_holds(first: dict[str, Any], again: dict[str, Any]) -> bool:
    """Whether a second run's candidate time is within noise of the first run's (both must be there): then
    a first run rejected as implausible was slowed in its baseline, not sped up in its candidate."""
    claimed, now = _median(first, "candidate"), _median(again, "candidate")
    return bool(claimed and now and now <= _noise(first, again) * claimed)
