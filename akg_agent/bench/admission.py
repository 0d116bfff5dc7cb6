"""`akg bench --jobs`: problems verified at once only while their estimated memory fits the device.

A verification holds its inputs and outputs, the reference's and the candidate's, and a float64 copy
of the reference's output: measured at about ten times one trial's inputs plus outputs (the
verdict's `peak_over_footprint`). A problem larger than the whole device still runs, alone."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from pathlib import Path

import torch

from ir.problem import load_problem

PEAK_FACTOR = 10  # the verifier's peak over one trial's inputs and outputs (see the module's docstring)


def verification_bytes(path: Path) -> int:
    """The memory a verification of this problem will hold, estimated from its sizes alone (fake inputs
    through the model under a fake-tensor mode; the weights are real, as the verifier's are); 0 where
    the estimate fails (the problem is then admitted, and its own run reports the failure)."""
    try:
        problem = load_problem(path)
        model = problem.build_model(0)
        weights = sum(p.numel() * p.element_size() for p in model.state_dict().values())
        mode, fake = problem.fake_inputs()
        with mode, torch.no_grad():
            out = model(*fake)
        outs = list(out) if isinstance(out, (tuple, list)) else [out]
        trial = sum(t.numel() * t.element_size() for t in [*fake, *outs] if isinstance(t, torch.Tensor))
        return PEAK_FACTOR * trial + 3 * weights  # weights: the reference's, its float64 copy's, the candidate's
    except Exception:  # noqa: BLE001 - any failure here is the problem's own, reported by its run
        return 0


def device_capacity(target_kind: str) -> int:
    """Free memory where verifications run: the GPU's, else the host's available memory."""
    if target_kind == "gpu" and torch.cuda.is_available():
        return torch.cuda.mem_get_info()[0]
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    return 1 << 62


class MemoryGate:
    """Admits work while the memory it asks for fits `capacity`; what asks for more than all of it
    waits until it runs alone."""

    def __init__(self, capacity: int) -> None:
        self.capacity, self.used = capacity, 0
        self.cond = threading.Condition()

    @contextlib.contextmanager
    def hold(self, need: int) -> Iterator[None]:
        need = min(need, self.capacity)
        with self.cond:
            self.cond.wait_for(lambda: self.used + need <= self.capacity)
            self.used += need
        try:
            yield
        finally:
            with self.cond:
                self.used -= need
                self.cond.notify_all()
