"""Streamed outputs of the C++ backend's pointwise and row kernels: each block of STREAM_BLOCK floats
is computed into an aligned stack buffer, then written with non-temporal stores (no read for
ownership, no eviction of the inputs), where the output is larger than the last-level cache can keep
for its reader anyway. A schedule knob (`stream`), its default by output size, on hosts where such stores
pay (the host model's `stream_stores`)."""

from __future__ import annotations

from collections.abc import Callable

from hardware_models.spec import HardwareModel
from ir.kernel.ir import Kernel, size_args
from ir.kernel.schedule import Schedule

from .terms import terms_in_output

STREAM_BLOCK = 64


def streamable(k: Kernel) -> bool:
    """Pointwise and row kernels with fp32 outputs, but a row kernel that keeps its terms in its output's
    row: its sweep reads them back there (`terms.terms_in_output`)."""
    return k.kind in ("pointwise", "rownorm") and k.out.dtype == "f32" and not size_args(k) \
        and not terms_in_output(k)


def streamed(k: Kernel, s: Schedule) -> bool:
    return bool(s.get("stream")) and streamable(k)


def blocks(n: int, dst: str, fill: Callable[[str], list[str]], indent: str) -> list[str]:
    """A loop over `n` outputs from `dst` on, STREAM_BLOCK at a time: `fill(indent)` writes the lines
    that set akg_buf[i - akg_cb] for i in [akg_cb, akg_ce); the block is then streamed out."""
    b = STREAM_BLOCK
    return [f"{indent}for (int64_t akg_cb = 0; akg_cb < {n}; akg_cb += {b}) {{",
            f"{indent}    alignas(32) float akg_buf[{b}];",
            f"{indent}    const int64_t akg_ce = std::min<int64_t>({n}, akg_cb + {b});", *fill(indent + "    "),
            f"{indent}    akg_stream({dst} + akg_cb, akg_buf, akg_ce - akg_cb);", f"{indent}}}"]


def parallel(s: Schedule, loop: list[str]) -> list[str]:
    """`loop` shared among the threads, each fencing its streamed stores before the region ends."""
    t = s.get("threads")
    return [f"    #pragma omp parallel{f' num_threads({t})' if t else ''}", "    {",
            "    #pragma omp for schedule(static)", *loop, "    akg_sfence();", "    }"]


def stream_default(k: Kernel, target: HardwareModel) -> Schedule:
    """Streamed stores for an output at least half the last-level cache: its reader finds little of it
    cached anyway, and plain stores would first read every line they write."""
    big = k.out.numel * 4 >= target.chip("l2_bytes") / 2
    pays = (f := target.fig("chip", "stream_stores")) is None or bool(f.value)
    return Schedule(stream=True) if streamable(k) and big and target.kind == "cpu" and pays else Schedule()
