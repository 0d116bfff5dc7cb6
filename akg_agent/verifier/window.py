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
    """The candidate called back to back (about 20 ms of calls, 3 to 1000 of them), WINDOWS times, each between
    two marks that the parent process stamps with its own clock, which no code in this process can reach: a
    clock replaced anywhere in here (below Python too) shows as windows far longer than the calls' timings.
    The parent keeps the shortest, so one window a busy host preempted does not count against the module."""
    if _BARRIER is None:
        return None
    fd, nonce = _BARRIER
    calls = max(3, min(1000, math.ceil(0.02 / max(per_call_s, 1e-9))))
    with torch.no_grad():
        for w in range(WINDOWS):
            os.write(fd, f"{nonce} begin{w}\n".encode())
            for _ in range(calls):
                cand(*args)
            if device.type == "cuda":
                timing._sync()
            os.write(fd, f"{nonce} end{w}\n".encode())
    return {"calls": calls, "claimed_s": calls * per_call_s}


WINDOWS = 3
