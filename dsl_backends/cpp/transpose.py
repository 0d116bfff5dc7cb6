"""Pointwise kernels that read an operand transposed: a channels-last convolution's output read back
channels-first, a permute's copy. The rows-then-columns loop would step the operand's strided axis in
its SIMD loop, each element on another cache line (a gather), and come back to that line only a whole
row of lines later. Here the kernel runs TILE rows at a time: each transposed operand's block is
loaded TILE vectors along its own contiguous axis at a time, transposed in registers (`akg_tile_t`, in
the prelude), and the rows' outputs are computed from that copy with contiguous loads and stores."""

from __future__ import annotations

import math

from ir.kernel.ir import Kernel, Load, Var, free_vars, walk
from ir.kernel.schedule import Schedule

from ..cstyle import CPrinter, decode
from .columns import row_values
from .style import STYLE, omp

TILE = 16  # a tile's side: one 64-byte line of fp32, one AVX-512 vector
COLUMNS = 256  # columns a task at most: its TILE x COLUMNS block of each operand (16 KB) stays in L1


def _transposed(e: Load, last: Var) -> Var | None:
    """The coordinate an fp32 load is contiguous along where it also steps along `last` through another
    axis (and neither appears anywhere else in its index): that load reads a transposed tile."""
    if e.buf.dtype != "f32" or e.mask is not None or len(e.index) < 2 or not isinstance(e.index[-1], Var):
        return None
    t = e.index[-1]
    at = [i for i, x in enumerate(e.index[:-1]) if isinstance(x, Var) and x.name == last.name]
    others = [x for i, x in enumerate(e.index[:-1]) if i not in at]
    if len(at) != 1 or t.name == last.name or any({t.name, last.name} & free_vars(x) for x in others):
        return None
    return t


def transposed_coord(k: Kernel) -> Var | None:
    """The output coordinate along which some operand of `k` is read transposed, where it is long enough
    to fill half a tile and is not the one next to the last (the row loop's consecutive rows step that
    one, and find the lines the row before fetched still in L1); None where no operand is so read."""
    *outer, last = k.coords
    for e in walk(k.expr):
        t = _transposed(e, last) if isinstance(e, Load) else None
        if t is not None and t in outer[:-1] and t.extent >= TILE // 2:
            return t
    return None


def transposed_tiles(k: Kernel, s: Schedule, t: Var) -> list[str]:
    """Per task (in parallel): TILE rows at consecutive `t` over up to COLUMNS columns. Each operand read
    transposed along `t` is copied, TILE x TILE at a time transposed in registers, to a row-major block;
    then each row is a SIMD loop over the block's columns (contiguous loads and stores)."""
    *outer, last = k.coords
    rest = [v for v in outer if v != t]
    cols = min(last.extent, COLUMNS)
    ld = -(-cols // TILE) * TILE
    tb, cb = -(-t.extent // TILE), -(-last.extent // cols)
    p = CPrinter(STYLE, {}, indent="        ")
    decode([(v.name, v.extent) for v in rest] + [("akg_tb", tb), ("akg_cb", cb)], "akg_o", p, bounded=True)
    nc = str(cols) if last.extent % cols == 0 else f"std::min<int64_t>({cols}, {last.extent} - akg_c0)"
    p.emit(f"const int64_t akg_t0 = akg_tb * {TILE}, akg_c0 = akg_cb * {cols}, akg_nc = {nc};")
    p.emit(f"const int akg_nt = (int)std::min<int64_t>({TILE}, {t.extent} - akg_t0);")
    base = CPrinter(STYLE, dict(p.env, **{t.name: "akg_t0", last.name: "akg_c0"}), indent=p.indent)
    base.counter = p.counter
    tiles: dict[Load, str] = {}
    fixed: dict[int, str] = {}
    for e in walk(k.expr):
        if not isinstance(e, Load) or _transposed(e, last) != t:
            continue
        if e not in tiles:
            name = tiles[e] = f"akg_tile{len(tiles)}"
            dim = next(i for i, x in enumerate(e.index[:-1]) if isinstance(x, Var) and x.name == last.name)
            start, stride = base.flat_index(e), e.buf.strides()[dim]
            p.lines += base.lines
            base.lines = []
            p.emit(f"alignas(64) float {name}[{TILE * ld}];")
            p.emit(f"for (int64_t akg_k = 0; akg_k < akg_nc; akg_k += {TILE}) akg_tile_t({e.buf.name} + {start} + "
                   f"akg_k * {stride}, {stride}, akg_nt, (int)std::min<int64_t>({TILE}, akg_nc - akg_k), "
                   f"{name} + akg_k, {ld});")
        fixed[id(e)] = f"{tiles[e]}[(akg_t - akg_t0) * {ld} + (akg_c - akg_c0)]"
    pt = CPrinter(STYLE, dict(p.env, **{t.name: "akg_t"}), indent="            ")  # a row of the tile
    pt.counter = p.counter
    pt.fixed.update(fixed)
    row_values(pt, [k.expr], last.name)
    pi = CPrinter(STYLE, dict(pt.env, **{last.name: "akg_c"}), indent="                ")
    pi.counter, pi.names = p.counter, dict(pt.names)
    pi.fixed.update(fixed)
    val = pi(k.expr)
    row = "0"
    for v in outer:
        row = f"({row} * {v.extent} + {pi.env[v.name]})"
    n = math.prod(v.extent for v in rest) * tb * cb
    return [omp(s), f"    for (int64_t akg_o = 0; akg_o < {n}; ++akg_o) {{", *p.lines,
            "        for (int64_t akg_t = akg_t0; akg_t < akg_t0 + akg_nt; ++akg_t) {", *pt.lines,
            "            #pragma omp simd",
            "            for (int64_t akg_c = akg_c0; akg_c < akg_c0 + akg_nc; ++akg_c) {",
            *pi.lines, f"                out[{row} * {last.extent} + akg_c] = {STYLE.store(k.out.dtype, val)};",
            "            }", "        }", "    }"]
