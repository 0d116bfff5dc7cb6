"""`akg bench --jobs`: problems verified at once only while their estimated memory fits the device
(`verifier.memory.verification_bytes`). A problem larger than the whole device still runs, alone."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from pathlib import Path

import torch

from ..verifier.memory import PEAK_FACTOR, verification_bytes

__all__ = ["PEAK_FACTOR", "MemoryGate", "device_capacity", "verification_bytes"]


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
