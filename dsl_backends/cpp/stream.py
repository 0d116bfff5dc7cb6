"""Streamed outputs of the C++ backend's pointwise and row kernels: each block of STREAM_BLOCK floats
is computed into an aligned stack buffer, then written with non-temporal stores (no read for
ownership, no eviction of the inputs), where the output is larger than the last-level cache can keep
for its reader anyway. A schedule knob (`stream`), its default by output size."""

from __future__ import annotations

from hardware_models.spec import HardwareModel
from ir.kernel.ir import Kernel, size_args
from ir.kernel.schedule import Schedule

STREAM_BLOCK = 64


def streamable(k: Kernel) -> bool:
    return k.kind in ("pointwise", "rownorm") and k.out.dtype == "f32" and not size_args(k)


def streamed(k: Kernel, s: Schedule) -> bool:
    return bool(s.get("stream")) and streamable(k)


def parallel(s: Schedule, loop: list[str]) -> list[str]:
    """`loop` shared among the threads, each fencing its streamed stores before the region ends."""
    t = s.get("threads")
    return [f"    #pragma omp parallel{f' num_threads({t})' if t else ''}", "    {",
            "    #pragma omp for schedule(static)", *loop, "    akg_sfence();", "    }"]


def stream_default(k: Kernel, target: HardwareModel) -> Schedule:
    """Streamed stores for an output at least half the last-level cache: its reader finds little of it
    cached anyway, and plain stores would first read every line they write."""
    big = k.out.numel * 4 >= target.chip("l2_bytes") / 2
    return Schedule(stream=True) if streamable(k) and big and target.kind == "cpu" else Schedule()
