"""Kernel IR -> TileLang row-fused kernels (softmax, norms: the "rownorm" kind). A block owns BM rows. Each
reduction, inner ones first, folds its row in BR chunks: a T.Parallel fill of a (BM, BR) fragment (masked
lanes take the reduction's identity), T.reduce_* into a part, added into the row's accumulator (a product
multiplies serially: TileLang has no product fold). Then the output's columns are written chunk by chunk,
each element computed from the inputs and the row's accumulators. The row is read once per reduction and
once for the output, inside one kernel (after the first sweep from the cache): no intermediate tensor is
written and read back, as the split plan's reduce + pointwise kernels do."""

from __future__ import annotations

import math

from ir.kernel import siblings
from ir.kernel.ir import Kernel, Reduce
from ir.kernel.schedule import Schedule

from ..exprs import Printer, comp, py_decode, row_coords
from .exprs import Scope, const, store
from .render import FILL, _factory, _nest

_COMB = {"sum": "{a}[r] + {p}[r]", "dot": "{a}[r] + {p}[r]", "max": "T.max({a}[r], {p}[r])",
         "min": "T.min({a}[r], {p}[r])"}


def rownorm(k: Kernel, sched: Schedule) -> str:
    row_c, cols = row_coords(k)
    n, rows = math.prod(e for _, e in cols), math.prod(v.extent for v in row_c)
    reds = list(dict.fromkeys(k.reductions()))
    br = sched["BR"]
    env: dict[str, str] = {}
    rowb = ["row = bx * BM + r"]
    py_decode([(v.name, v.extent) for v in row_c], "row", rowb, env)
    lines = ['vals = FRAG((BM, BR), "float32")']
    lines += [ln for i in range(len(reds)) for ln in (f'acc{i} = FRAG((BM,), "float32")',
                                                      f'part{i} = FRAG((BM,), "float32")')]
    accs: dict[int, str] = {}

    def body_of(r: Reduce, j: str, out: list[str]) -> str:
        """The reduction's body at (row, column `j`) in fp32, its lines appended to `out`."""
        py_decode([(v.name, v.extent) for v in r.axes], j, out, env)
        p = Printer(Scope(env, dict(accs)).render)
        v = p(r.body)
        out += p.lines
        return v if comp(r.body.dtype) == "f32" else f'T.Cast("float32", {v})'

    for i, r in enumerate(reds):  # children first: an inner reduction is an accumulator by now
        ext = math.prod(v.extent for v in r.axes)
        a = f"acc{i}"
        if r.op == "prod":  # serially, one row per lane
            body = list(rowb) + [f"{a}[r] = T.float32(1.0)", f"for j in T.serial({ext}):"]
            inner: list[str] = []
            v = body_of(r, "j", inner)
            body += _nest(inner + [f"{a}[r] = {a}[r] * {v}"])
            lines += ["for r in PAR(BM):"] + _nest(body)
        else:
            lines += ["for r in PAR(BM):", f"    {a}[r] = {const(FILL[r.op], 'f32')}"]
            fill = list(rowb) + ["j = c * BR + jj"]
            v = body_of(r, "j", fill)
            fill.append(f"vals[r, jj] = T.if_then_else(T.And(row < {rows}, j < {ext}), {v}, "
                        f"{const(FILL[r.op], 'f32')})")
            loop = ["for r, jj in PAR(BM, BR):"] + _nest(fill)
            loop += [f"T.reduce_{ {'dot': 'sum'}.get(r.op, r.op) }(vals, part{i}, dim=1)", "for r in PAR(BM):",
                     f"    {a}[r] = " + _COMB[r.op].format(a=a, p=f"part{i}")]
            lines += [f"for c in T.serial({-(-ext // br)}):"] + _nest(loop)
        accs[id(r)] = f"{a}[r]"
    if k.also:  # the row's sibling values, one per row at the row's place
        body = list(rowb)
        p = Printer(Scope(env, accs).render, prefix="w")
        vals = [p(e) for _, e in k.also]
        body += p.lines
        at_rows = siblings.row_vars(k)
        for (b, _), v in zip(k.also, vals):
            at = " + ".join(f"{env[c.name]} * {st}" for c, st in zip(k.coords, b.strides()) if c in at_rows) or "0"
            body.append(f"o_{b.name}[{at}] = {store(v, b.dtype)}")
        lines += ["for r in PAR(BM):"] + _nest([body[0], f"if row < {rows}:"] + _nest(body[1:]))
    out = list(rowb) + ["col = c * BR + jj"]
    py_decode(cols, "col", out, env)
    p = Printer(Scope(env, accs).render, prefix="v")
    val = p(k.expr)
    out += p.lines
    flat = " + ".join(f"{env[v.name]} * {st}" if st != 1 else env[v.name]
                      for v, st in zip(k.coords, k.out.strides())) or "0"
    out += [f"if T.And(row < {rows}, col < {n}):"] + _nest([f"Out[{flat}] = {store(val, k.out.dtype)}"])
    lines += [f"for c in T.serial({-(-n // br)}):"] + _nest(["for r, jj in PAR(BM, BR):"] + _nest(out))
    consts = {"BM": sched["BM"], "BR": br, "THREADS": f"{sched.get('threads', 128)} if gpu else 1"}
    return _factory(k, sched, consts, f"with T.Kernel(T.ceildiv({rows}, BM), threads=THREADS) as bx:", lines)
