"""Software prefetches for the C-family renderers' streaming loops. The hardware prefetchers stop at every
4 KiB page, so a stream of short rows restarts them every page or two; a loop that knows its next rows asks
for them ahead. A prefetch never faults (one past the end of a buffer is dropped), so a row that has no
next row costs only the instruction."""

from __future__ import annotations

from collections.abc import Callable

from ir.kernel.build import ic
from ir.kernel.flatten import row_major_parts
from ir.kernel.ir import Load, Reduce, Var, walk
from ir.types import DTYPES

CACHE_LINE = 64  # bytes

FlatIndex = Callable[[Load], str]  # a printer's flat offset of a load


def row_prefetches(e: Reduce, flat_index: FlatIndex, ahead_bytes: int) -> list[tuple[str, str, int, int]]:
    """A sum over one contiguous axis of row-major operands (consecutive outputs read consecutive rows)
    prefetches `ahead_bytes` ahead of each chunk it reads, into the next rows past a row's end. (operand,
    its row's start, elements ahead, elements a cache line) each; none where `ahead_bytes` is 0."""
    if not ahead_bytes or len(e.axes) != 1 or not isinstance(e.axes[0].extent, int):
        return []
    out: dict[str, tuple[str, str, int, int]] = {}
    for ld in walk(e.body):
        if not isinstance(ld, Load) or ld.buf.name in out or ld.mask is not None:
            continue
        # the row's coordinates: the axis alone, or its row-major split (a flattened (H, W))
        n = next((n for n in range(1, len(ld.index)) if ld.index[-n:] ==
                  row_major_parts(e.axes[0], tuple(ld.buf.shape[-n:]))), 0)
        outer = ld.index[:-n] if n else ()
        if outer and all(isinstance(i, Var) and i.extent == d for i, d in zip(outer, ld.buf.shape)):
            start = flat_index(Load(ld.buf, (*outer, *(ic(0) for _ in range(n)))))
            size = DTYPES[ld.buf.dtype].itemsize
            out[ld.buf.name] = (ld.buf.name, start, ahead_bytes // size, max(1, CACHE_LINE // size))
    return list(out.values())


def next_row_prefetches(r: Reduce, inner: Var, n_in: int, flat_index: FlatIndex, ahead_bytes: int,
                        indent: str) -> list[str]:
    """Lines that prefetch, each step of a strided reduction (x[..., j, c], the contiguous outputs c in a
    SIMD loop), `ahead_bytes` ahead of the row of `n_in` it reads, where consecutive steps read consecutive
    rows: the whole operand is one stream."""
    out, seen = [], set()
    for ld in walk(r.body):
        if (isinstance(ld, Load) and ld.buf.name not in seen and ld.mask is None and len(r.axes) == 1
                and len(ld.index) >= 2 and ld.index[-1] == inner and ld.index[-2] == r.axes[0]
                and ld.buf.shape[-1] == n_in):
            seen.add(ld.buf.name)
            size = DTYPES[ld.buf.dtype].itemsize
            start = flat_index(Load(ld.buf, (*ld.index[:-1], ic(0))))
            out.append(f"{indent}for (int64_t akg_pf = 0; akg_pf < {n_in}; akg_pf += {max(1, CACHE_LINE // size)}) "
                       f"__builtin_prefetch({ld.buf.name} + ({start}) + {ahead_bytes // size} + akg_pf);")
    return out
