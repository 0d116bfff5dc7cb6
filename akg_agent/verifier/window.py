"""The window a timed run sends its parent (`sandbox._Stamps`): back-to-back candidate calls between marks
written to a FIFO the parent reads with its own clock (`plausibility.clock_disagrees` judges them)."""

from __future__ import annotations

import math
import os
from typing import Any

import torch

from . import timing

# the marks a timed run sends its parent around a window of back-to-back calls (`run`): the file
# descriptor of the parent's FIFO and the job's nonce, opened and read before the candidate is imported
_BARRIER: tuple[int, str] | None = None


def open_barrier(job: dict[str, Any], nonce: str | None) -> None:
    global _BARRIER
    if job.get("barrier") and nonce:
        try:
            _BARRIER = (os.open(job["barrier"], os.O_WRONLY | os.O_NONBLOCK), nonce)
        except OSError:  # no parent reading (a job run by hand): no window is reported
            _BARRIER = None


def run(cand: Any, args: list[Any], device: torch.device, per_call_s: float) -> dict[str, Any] | None:
    """The candidate called back to back (about WINDOW_S of calls, 3 to 10000 of them), WINDOWS times, each
    between two marks that the parent process stamps with its own clock, which no code in this process can
    reach, and each also timed here with the timer's clock: the two clocks must agree over the same window
    (a clock replaced in here, below Python too, does not). Both see the same load, so a busy host slows
    both alike; the windows run alone on the device (the timing lock), as the timed loops do."""
    if _BARRIER is None:
        return None
    fd, nonce = _BARRIER
    calls = max(3, min(10000, math.ceil(WINDOW_S / max(per_call_s, 1e-9))))
    spans = []
    with torch.no_grad(), timing.exclusive():
        for w in range(WINDOWS):
            os.write(fd, f"{nonce} begin{w}\n".encode())
            t0 = timing._clock()
            for _ in range(calls):
                cand(*args)
            if device.type == "cuda":
                timing._sync()
            spans.append(timing._clock() - t0)
            os.write(fd, f"{nonce} end{w}\n".encode())
    return {"calls": calls, "per_call_s": per_call_s, "worker_s": spans}


WINDOWS = 3
WINDOW_S = 0.1
