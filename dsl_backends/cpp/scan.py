"""C++ scans (cumsum, cumprod): rows in parallel, a running accumulator (double for floats) along the scanned
axis (forward or reverse), the epilogue computed and stored at each position in the same pass. The
scan is one read of its input and one write of its output; a flipped input is read in place."""

from __future__ import annotations

import math

from hardware_models.spec import HardwareModel
from ir.kernel.ir import Kernel, Var
from ir.kernel.schedule import Schedule

from ..cstyle import CPrinter, decode
from ..exprs import FLOATS, scan_rows
from .style import STYLE, omp


def render_scan(k: Kernel, s: Schedule, target: HardwareModel) -> list[str]:
    sc, rows = scan_rows(k)
    at = sc.at
    assert isinstance(at, Var)
    n, n_rows = at.extent, math.prod(v.extent for v in rows)
    p = CPrinter(STYLE, {}, indent="        ")
    decode([(v.name, v.extent) for v in rows], "akg_r", p)
    acc = "akg_acc"
    ty = "double" if sc.dtype in FLOATS else "int64_t"  # integer and bool sums stay exact
    step = f"{acc} {'+' if sc.op == 'sum' else '*'}= ({ty})"
    pi = CPrinter(STYLE, dict(p.env, **{at.name: "akg_j", sc.axis.name: "akg_j"}), indent="            ")
    pi.counter = p.counter
    body = pi(sc.body)
    pi.emit(f"{step}({body});")
    pi.fixed[id(sc)] = f"(({STYLE.ctype_compute(sc.dtype)}){acc})"
    val = pi(k.expr)
    strides = dict(zip((v.name for v in k.coords), k.out.strides()))
    flat = " + ".join(f"{name} * {st}" if st != 1 else name for name, st in
                      ((v.name if v != at else "akg_j", strides[v.name]) for v in k.coords))
    loop = (f"for (int64_t akg_j = {n - 1}; akg_j >= 0; --akg_j) {{" if sc.reverse else
            f"for (int64_t akg_j = 0; akg_j < {n}; ++akg_j) {{")
    return [omp(s), f"    for (int64_t akg_r = 0; akg_r < {n_rows}; ++akg_r) {{", *p.lines,
            f"        {ty} {acc} = {'0' if sc.op == 'sum' else '1'};", f"        {loop}", *pi.lines,
            f"            out[{flat}] = {STYLE.store(k.out.dtype, val)};", "        }", "    }"]
