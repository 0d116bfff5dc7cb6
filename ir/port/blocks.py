"""Block reductions, scans and dots of a lifted Triton launch (`execute`'s table calls them): sums, maxima
and minima (of the unpadded row where the padding is the identity), argmax / argmin, cumulative sums and
products, and `tt.dot` as a batched matmul over the grid's axes."""

from __future__ import annotations

from typing import Any

import numpy as np

from . import padding, ttir
from .values import IR_DTYPE as _IR_DTYPE
from .values import Num, Ptr, Sym, Value
from .values import block_of as _block_of
from .values import elem_of as _elem_of

Executor = Any  # ir.port.execute.Executor, whose op table holds these


def reduce(ex: Executor, op: ttir.Op) -> Value:
    axis = int(op.attr("axis") or 0)  # type: ignore[union-attr]
    body = [o for o in op.regions[0] if o.name != "tt.reduce.return"]
    if len(op.operands) == 2 and len(op.results) == 2:
        return _arg_reduce(ex, op, axis, body)
    if len(op.operands) != 1 or len(body) != 1:
        raise ex.fail("a reduction other than sum, max or min (an argmax, a custom combine): not lifted yet")
    combine = body[0].name.split(".", 1)[1]
    gop = {"addf": "sum", "addi": "sum", "maxnumf": "amax", "maximumf": "amax", "maxsi": "amax",
           "minnumf": "amin", "minimumf": "amin", "minsi": "amin", "mulf": "prod"}.get(combine)
    if gop is None:
        raise ex.fail(f"a reduction combining with {body[0].name}: not lifted yet")
    v = ex.get(op.operands[0])
    assert not isinstance(v, Ptr)
    g = len(ex.grid)
    shape = tuple(max(s, 1) for s in (v.pad[0] if isinstance(v, Sym) and v.pad else
                                       v.n.shape if isinstance(v, Sym) else v.a.shape))
    full_block = ttir.shape(op.text.split(" : (", 1)[1].split(")")[0]) if " : (" in op.text else shape[g:]
    if isinstance(v, Num):
        fn = {"sum": np.sum, "amax": np.max, "amin": np.min, "prod": np.prod}[gop]
        a = np.broadcast_to(v.a, v.a.shape[:g] + tuple(full_block))
        return Num(np.asarray(fn(a, axis=g + axis)), v.elem)
    if v.pad is not None:
        got = padding.reduce(ex, gop, v, g + axis)
        if got is not None:
            return got
    n = ex.full(v, tuple(v.n.shape[:g]) + tuple(full_block))
    return Sym(ex.cx.add(gop, [n], dims=[g + axis], keepdim=False), v.elem)


def _arg_reduce(ex: Executor, op: ttir.Op, axis: int, body: list[ttir.Op]) -> tuple[Value, Value]:
    """tl.argmax / tl.argmin: a reduction of (values, their positions) keeping the greater (smaller) value,
    the lower position on ties; (the maximum, its position)."""
    v, idx = ex.get(op.operands[0]), ex.get(op.operands[1])
    preds = {o.text.split()[1].rstrip(",") for o in body if o.name == "arith.cmpf"}
    kind = "argmax" if "ogt" in preds else "argmin" if "olt" in preds else None
    g = len(ex.grid)
    if kind is None or not isinstance(idx, Num) or isinstance(v, (Ptr, Num)):
        raise ex.fail("a reduction of two values other than tl.argmax / tl.argmin: not lifted yet")
    n_axis = idx.a.shape[g + axis]
    want = np.arange(n_axis).reshape([n_axis if d == g + axis else 1 for d in range(idx.a.ndim)])
    if not (np.broadcast_to(idx.a, np.broadcast_shapes(idx.a.shape, want.shape)) == want).all():
        raise ex.fail("an argmax over positions other than the block's own range: not lifted yet")
    if v.pad is not None and v.pad[1] != padding.IDENTITY["amax" if kind == "argmax" else "amin"]:
        v = Sym(ex.node(v), v.elem)
    n = v.n if v.pad is not None else ex.full(v, tuple(v.n.shape[:g]) + tuple(
        max(a, b) for a, b in zip(v.n.shape[g:], idx.a.shape[g:])))
    best = ex.cx.add("amax" if kind == "argmax" else "amin", [n], dims=[g + axis], keepdim=False)
    pos = ex.cx.add(kind, [n], dim=g + axis, keepdim=False)
    return Sym(best, v.elem), Sym(ex.cx.add("cast", [pos], dtype=_IR_DTYPE[idx.elem]), idx.elem)


def scan(ex: Executor, op: ttir.Op) -> Value:
    axis = int(op.attr("axis") or 0)
    body = [o for o in op.regions[0] if o.name != "tt.scan.return"]
    gop = {"arith.addf": "cumsum", "arith.addi": "cumsum", "arith.mulf": "cumprod"}.get(body[0].name) \
        if len(body) == 1 and len(op.operands) == 1 else None
    if gop is None:
        raise ex.fail("a scan other than tl.cumsum / tl.cumprod: not lifted yet")
    v = ex.get(op.operands[0])
    if isinstance(v, Ptr):
        raise ex.fail("a scan of pointers")
    g = len(ex.grid)
    block = _block_of(op)
    if isinstance(v, Num):
        a = np.broadcast_to(v.a, v.a.shape[:g] + block)
        return Num((np.cumsum if gop == "cumsum" else np.cumprod)(a, axis=g + axis).astype(a.dtype), v.elem)
    n = ex.full(v, tuple(ex.node(v).shape[:g]) + block)  # padded lanes follow the row: they change no prefix
    rev = "reverse = true" in op.text
    return Sym(ex.cx.add(gop, [n], dim=g + axis, reverse=rev), v.elem)


def dot(ex: Executor, op: ttir.Op) -> Value:
    a, b = ex.get(op.operands[0]), ex.get(op.operands[1])
    acc = ex.get(op.operands[2]) if len(op.operands) > 2 else None
    assert not isinstance(a, Ptr) and not isinstance(b, Ptr)
    g = len(ex.grid)
    out = _block_of(op)
    na, nb = ex.node(a), ex.node(b)
    m = ex.cx.add("matmul", [na, nb])
    elem = _elem_of(op)
    if _IR_DTYPE[elem] != m.dtype:
        m = ex.cx.add("cast", [m], dtype=_IR_DTYPE[elem])
    if acc is not None and not (isinstance(acc, Num) and not acc.a.any()):
        assert not isinstance(acc, Ptr)
        m = ex.cx.add("add", [ex.node(acc), m])
    if len(out) != m.type.rank - g:
        raise ex.fail("a tt.dot of unexpected rank")
    return Sym(m, elem)


