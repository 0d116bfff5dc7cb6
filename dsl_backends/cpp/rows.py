"""C++ pointwise kernels as rows x columns: a parallel loop over the rows around a SIMD sweep along the
last coordinate (or the trailing ones merged), with values of the row alone computed once a row, values of
the column alone once a call, and a concatenation's or a padded window's masks resolved per row or run."""

from __future__ import annotations

import math

from ir.kernel.cases import column_cases, row_cases
from ir.kernel.interior import interior
from ir.kernel.ir import Expr, Kernel
from ir.kernel.schedule import Schedule

from ..cstyle import CPrinter, decode
from .columns import column_values, precompute, row_values
from .stream import blocks, parallel, streamed
from .style import STYLE, omp

ROW_LOOP_MIN = 16  # a pointwise kernel whose last dimension is at least this long loops rows x columns
COLUMN_TABLE_MAX = 4096  # entries of a table of per-column values over merged trailing coordinates


def merged_columns(k: Kernel) -> int:
    """How many trailing coordinates a pointwise kernel with a short last one (a channels-last tensor of 8
    channels) sweeps as one column, where values read at the last coordinate alone (a batch norm's mean,
    variance, weight and bias) then become tables over those columns, read contiguously: at least
    ROW_LOOP_MIN columns, at most COLUMN_TABLE_MAX; 0 where no such value or no such span."""
    if len(k.coords) < 3 or k.also and any(b.shape != k.out.shape for b, _ in k.also):
        return 0
    last = k.coords[-1]
    if not column_values(k, [(last.name, last.extent)], loads=True):
        return 0
    n = last.extent
    for m in range(2, len(k.coords)):
        n *= k.coords[-m].extent
        if n > COLUMN_TABLE_MAX:
            return 0
        if n >= ROW_LOOP_MIN:
            return m
    return 0


def rows_then_columns(k: Kernel, s: Schedule, merged: int = 1) -> list[str]:
    """A pointwise kernel as a parallel loop over rows (all but the last coordinate, decoded once per
    row, with the values that depend on the row alone) around a SIMD loop along the last one:
    contiguous loads, no division per element. `merged` > 1: the loop runs along that many trailing
    coordinates as one, their values that read memory precomputed as tables over it (`merged_columns`).
    A concatenation along an outer axis branches once per row to the one source it reads, along the last
    axis sweeps each source's run of columns (`ir.kernel.cases`);
    a padded window runs its mask-free expression over the interior columns of rows whose own conditions
    hold (`ir.kernel.interior`), the masked one elsewhere."""
    outer, inner = k.coords[:-merged], k.coords[-merged:]
    n_in, n_out = math.prod(v.extent for v in inner), math.prod(v.extent for v in outer)
    cases = row_cases(k) if merged == 1 else []  # a concatenation's rows: one source each, unmasked
    runs = column_cases(k) if merged == 1 and not cases else []  # or its runs of columns
    inside = interior(k) if merged == 1 and not cases and not runs else None
    cols = [(v.name, v.extent) for v in inner]
    # values of the column alone that make a math call (a norm's scale over channels-last rows): once
    forms = (*(e for c in cases for e in (c.expr, *c.also)), *((inside.expr, *inside.also) if inside else ()))
    pre, fixed = precompute(column_values(k, cols, loads=merged > 1, more=forms), cols, n_in, "akg_c")
    p = CPrinter(STYLE, {}, indent="        ")
    p.fixed.update(fixed)
    decode([(v.name, v.extent) for v in outer], "akg_o", p)
    row_values(p, [k.expr, *(e for _, e in k.also)] + ([inside.expr, *inside.also] if inside else []),
               {v.name for v in inner})
    at, stride = {}, 1
    for v in reversed(inner):  # the column's coordinates, for what is not a table
        at[v.name] = f"((akg_c / {stride}) % {v.extent})" if stride > 1 else \
            ("akg_c" if merged == 1 else f"(akg_c % {v.extent})")
        stride *= v.extent

    def sweep(expr: Expr, lo: str, hi: str, indent: str, to: str = "", also: tuple[Expr, ...] = ()) -> list[str]:
        pi = CPrinter(STYLE, dict(p.env, **at), indent=indent + "    ")
        pi.counter, pi.names = p.counter, dict(p.names)
        pi.fixed.update(fixed)
        pi.identity = (tuple(v.name for v in k.coords), k.out.shape, f"(akg_o * {n_in} + akg_c)")
        val = pi(expr)
        stores = [f"{indent}    {b.name}[akg_o * {n_in} + akg_c] = {STYLE.store(b.dtype, pi(e))};"
                  for (b, _), e in zip(k.also, also)]
        return [f"{indent}#pragma omp simd", f"{indent}for (int64_t akg_c = {lo}; akg_c < {hi}; ++akg_c) {{",
                *pi.lines, f"{indent}    {to or f'out[akg_o * {n_in} + akg_c]'} = {STYLE.store(k.out.dtype, val)};",
                *stores, f"{indent}}}"]

    everywhere = tuple(e for _, e in k.also)
    tests = [" && ".join(p(a) if v else f"!{p(a)}" for a, v in c.holds) for c in cases[:-1]]

    def cased(lo: str, hi: str, indent: str, to: str = "") -> list[str]:
        """The sweep, or one per row case: the first whose conditions hold, the last where none did."""
        if not cases:
            return sweep(k.expr, lo, hi, indent, to, also=everywhere)
        lines = []
        for i, c in enumerate(cases):
            lines += [f"{indent}if ({tests[i]}) {{" if i == 0 else f"{indent}}} else if ({tests[i]}) {{"
                      if i < len(tests) else f"{indent}}} else {{", *sweep(c.expr, lo, hi, indent + "    ", to, c.also)]
        return [*lines, f"{indent}}}"]

    if runs:
        body = [ln for lo, hi, c in runs for ln in sweep(c.expr, str(lo), str(hi), "        ", also=c.also)]
        return [*pre, omp(s), f"    for (int64_t akg_o = 0; akg_o < {n_out}; ++akg_o) {{", *p.lines, *body, "    }"]
    if inside is None and streamed(k, s) and not k.also:
        row = blocks(n_in, f"out + akg_o * {n_in}",
                     lambda ind: cased("akg_cb", "akg_ce", ind, to="akg_buf[akg_c - akg_cb]"), "        ")
        return [*pre, *parallel(s, [f"    for (int64_t akg_o = 0; akg_o < {n_out}; ++akg_o) {{", *p.lines, *row,
                                    "    }"])]
    body = cased("0", str(n_in), "        ")
    if inside is not None:  # edges (a whole row where its conditions fail) masked, the interior not
        ok = " && ".join(p(c) for c in inside.row_conditions) or "true"
        body = ["        const int64_t akg_lo = " + f"({ok}) ? {inside.lo} : {n_in};",
                f"        const int64_t akg_hi = std::max<int64_t>(akg_lo, {inside.hi});",
                "        for (int akg_part = 0; akg_part < 2; ++akg_part) {",
                "            const int64_t akg_b = akg_part ? akg_hi : 0, akg_e = akg_part ? "
                f"{n_in} : akg_lo;",
                *sweep(k.expr, "akg_b", "akg_e", "            ", also=everywhere), "        }",
                *sweep(inside.expr, "akg_lo", "akg_hi", "        ", also=inside.also)]
    return [*pre, omp(s), f"    for (int64_t akg_o = 0; akg_o < {n_out}; ++akg_o) {{", *p.lines, *body, "    }"]
