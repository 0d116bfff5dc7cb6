"""A loop lifted whole instead of unrolled: its iterations become one more axis of every value inside it
(after the grid's, so block ops keep their axes). It applies where each carried value either moves by a
fixed step per iteration (pointers, counters) or accumulates: `acc = tt.dot(a, b, acc)` (the iterations'
products become one contraction over iterations x K) or `acc = acc + x` (a sum over the new axis). A
loop that carries anything else (an online softmax's running maximum) is unrolled by the caller."""

from __future__ import annotations

from typing import Any

import numpy as np

from . import gemm, ttir
from .values import Num, Ptr, Sym, Value

Executor = Any  # ir.port.execute.Executor, which runs loops through this module


class AxisEnv(dict):
    """The loop body's environment: values from outside gain the iteration axis (size 1) when first read."""

    def __init__(self, outer: dict[str, Any], ex: Executor, axis: int) -> None:
        super().__init__()
        self.outer, self.ex, self.axis = outer, ex, axis

    def __missing__(self, name: str) -> Any:
        v = lift_axis(self.ex, self.outer[name], self.axis)
        self[name] = v
        return v


def lift_axis(ex: Executor, v: Value, axis: int) -> Value:
    if isinstance(v, Ptr):
        return Ptr(v.arg, lift_axis(ex, v.off, axis))  # type: ignore[arg-type]
    if isinstance(v, Num):
        return Num(np.expand_dims(v.a, axis), v.elem)
    shape = list(v.n.shape)
    shape.insert(axis, 1)
    return Sym(ex.cx.add("reshape", [v.n], shape=shape), v.elem)


def _producer(body: list[ttir.Op], name: str) -> ttir.Op | None:
    return next((o for o in body if name in o.results), None)


def classify(ex: Executor, op: ttir.Op, carried: list[Value]) -> list[tuple[str, Any]] | None:
    """Per carried value: ("step", its per-iteration step as a Num) or ("dot"/"add", None); None where
    the loop is not of that form."""
    names, body = op.block_args[0], op.regions[0]
    yields = body[-1].operands
    kinds: list[tuple[str, Any]] = []
    for n, init, y in zip(names[1:], carried, yields):
        made = _producer(body, y)
        users = [o for o in body if n in o.operands and o.name != "scf.yield"]
        if made is None:
            return None
        if isinstance(init, (Ptr, Num)) and made.name in ("tt.addptr", "arith.addi") and \
                made.operands[0] == n and made.operands[1] in ex.env:
            step = ex.env[made.operands[1]]
            if not isinstance(step, Num) or isinstance(init, Ptr) and not isinstance(init.off, Num):
                return None
            kinds.append(("step", step))
        elif made.name == "tt.dot" and len(made.operands) > 2 and made.operands[2] == n and users == [made] \
                and y not in [x for o in body if o is not made and o.name != "scf.yield" for x in o.operands]:
            kinds.append(("dot", None))
        elif made.name == "arith.addf" and n in made.operands and users == [made] and \
                y not in [x for o in body if o is not made and o.name != "scf.yield" for x in o.operands]:
            kinds.append(("add", None))
        else:
            return None
    return kinds


def run_whole(ex: Executor, op: ttir.Op, steps: range, carried: list[Value]) -> list[Value] | None:
    """The loop's results, computed with the iterations as an axis; None where it is not of that form."""
    kinds = classify(ex, op, carried)
    if kinds is None or len(steps) < 2:
        return None
    names, body = op.block_args[0], op.regions[0]
    g, T = len(ex.grid), len(steps)
    outer_env, outer_grid = ex.env, ex.grid
    ex.grid = outer_grid + (T,)
    ex.env = AxisEnv(outer_env, ex, g)
    it = np.arange(T, dtype=np.int64).reshape((1,) * g + (T,))
    ex.env[names[0]] = Num(steps.start + steps.step * it, "i32")
    for n, init, (kind, step) in zip(names[1:], carried, kinds):
        if kind == "step":
            base = lift_axis(ex, init, g)
            d = np.expand_dims(step.a, g)
            moved = lambda a: a + d * it.reshape(it.shape + (1,) * (a.ndim - it.ndim))  # noqa: E731
            ex.env[n] = Ptr(base.arg, Num(moved(base.off.a), "i64")) if isinstance(base, Ptr) else \
                Num(moved(base.a), base.elem)  # type: ignore[union-attr]
        else:
            ex.env[n] = Num(np.zeros((1,) * (g + 1), dtype=np.float32), "f32")  # the zero accumulator
    try:
        ex.run(body)
        out: list[Value] = []
        for init, y, (kind, step) in zip(carried, body[-1].operands, kinds):
            if kind == "step":
                d = step.a * T
                out.append(Ptr(init.arg, Num(init.off.a + d, "i64")) if isinstance(init, Ptr) else
                           Num(init.a + d, init.elem))  # type: ignore[union-attr]
                continue
            v = ex.env[y]
            assert isinstance(v, Sym)
            inner = v.n
            while inner.op == "cast":
                inner = inner.args[0]
            total = _contract(ex, v, g) if kind == "dot" or inner.op == "matmul" else \
                ex.cx.add("sum", [_materialized(ex, v.n, g, T)], dims=[g], keepdim=False)  # acc += tl.dot(...)
            if total.dtype != v.n.dtype:
                total = ex.cx.add("cast", [total], dtype=v.n.dtype)
            if not (isinstance(init, Num) and not init.a.any()):
                total = ex.cx.add("add", [ex.node(init), total])  # type: ignore[arg-type]
            out.append(Sym(total, v.elem))
        return out
    finally:
        ex.grid, ex.env = outer_grid, outer_env


def _materialized(ex: Executor, n: Any, axis: int, size: int) -> Any:
    if n.shape[axis] == size:
        return n
    shape = list(n.shape)
    shape[axis] = size
    return ex.cx.add("expand", [n], shape=shape)


def _contract(ex: Executor, v: Any, g: int) -> Any:
    """sum over the iteration axis of the iterations' products, as one matmul over iterations x K."""
    m = v.n
    while m.op == "cast":
        m = m.args[0]
    if m.op != "matmul":
        raise ex.fail("a loop's dot accumulator is not a plain tt.dot: not lifted yet")
    a, b = m.args
    T = ex.grid[g] if len(ex.grid) > g else None
    T = max(a.shape[g], b.shape[g]) if T is None else T
    a, b = _materialized(ex, a, g, T), _materialized(ex, b, g, T)
    *lead, _, M, K = a.shape
    N = b.shape[-1]
    dims = list(range(g)) + [g + 1, g, g + 2]
    a2 = ex.cx.add("reshape", [ex.cx.add("permute", [a], dims=dims)], shape=list(a.shape[:g]) + [M, T * K])
    b2 = ex.cx.add("reshape", [b], shape=list(b.shape[:g]) + [T * K, N])
    out = ex.cx.add("matmul", [a2, b2])
    ra, rb = gemm.read_of(a), gemm.read_of(b)
    if ra is not None and rb is not None:  # the tiles' addresses in the same order, for `gemm.whole`
        full_a, full_b = tuple(a.shape), tuple(b.shape)
        oa, ma = (np.broadcast_to(x, full_a).transpose(dims).reshape(list(full_a[:g]) + [M, T * K])
                  for x in (ra[1], ra[2]))
        ob, mb = (np.broadcast_to(x, full_b).reshape(list(full_b[:g]) + [T * K, N]) for x in (rb[1], rb[2]))
        out.meta["port_gemm"] = ((ra[0], oa, ma), (rb[0], ob, mb))
    return out
