"""Host buffers in a loop: allocate, write once, free, as a training step does with each kernel output; on
4 KiB pages (torch.empty) and 2 MiB-aligned marked MADV_HUGEPAGE (a written module's `_akg_empty`). Median
of 15 calls per size, each size twice in turns; the first call of each kind is in the median's sample too.

    python benchmarks/huge_pages.py > benchmarks/results/archive/cpu-huge-pages-steady-DATE.txt
"""

from __future__ import annotations

import ctypes
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from akg_agent.bench.provenance import provenance  # noqa: E402

HUGE = 1 << 21
_madvise = ctypes.CDLL(None, use_errno=True).madvise
_madvise.argtypes, _madvise.restype = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int], ctypes.c_int


def huge(nbytes: int) -> torch.Tensor:
    raw = torch.empty(nbytes + HUGE, dtype=torch.uint8)
    off = -raw.data_ptr() % HUGE
    _madvise(raw.data_ptr() + off, (nbytes + HUGE - off) // HUGE * HUGE, 14)
    return raw[off:off + nbytes].view(torch.float32)


def plain(nbytes: int) -> torch.Tensor:
    return torch.empty(nbytes // 4)


def median_ms(make: Callable[[int], torch.Tensor], nbytes: int, calls: int = 15) -> float:
    times = []
    for _ in range(calls):
        t0 = time.perf_counter()
        x = make(nbytes)
        x.fill_(1.0)
        del x
        times.append(time.perf_counter() - t0)
    return sorted(times)[calls // 2] * 1e3


def main() -> None:
    print("# " + json.dumps({**provenance(), "command": "python benchmarks/huge_pages.py"}))
    print("MiB  huge_ms  plain_ms  huge_ms  plain_ms")
    for mib in (4, 8, 16, 32, 48, 64, 128, 256):
        n = mib << 20
        row = [median_ms(huge, n), median_ms(plain, n), median_ms(huge, n), median_ms(plain, n)]
        print(f"{mib:4d} " + " ".join(f"{v:8.2f}" for v in row))


if __name__ == "__main__":
    main()
