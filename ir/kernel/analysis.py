"""Kernel-IR analyses the core and every backend share: a GEMM's parts and dimensions (the launch
grid of every GEMM template follows from them), and a row-fused kernel's row and column coordinates."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import UnsupportedKernel
from .ir import Const, Expr, Kernel, Reduce, Var, children, free_vars, walk


@dataclass(frozen=True)
class GemmParts:
    """A matmul kernel taken apart: its one dot reduction, the A and B element expressions, the K axis, and
    the output coordinates that index A only (rows), B only (cols) or both (batch)."""

    dot: Reduce
    a: Expr
    b: Expr
    k: Var
    rows: list[tuple[str, int]]
    cols: list[tuple[str, int]]
    batch: list[tuple[str, int]]


def split_gemm(k: Kernel) -> GemmParts:
    """Raises UnsupportedKernel unless `k` holds exactly one reduction, a dot."""
    dots = [r for r in k.reductions() if r.op == "dot"]
    if len(dots) != 1 or len(k.reductions()) != 1:
        raise UnsupportedKernel("not a single GEMM")
    dot = dots[0]
    a_e, b_e = dot.body.args  # type: ignore[attr-defined]
    kv = dot.axes[0]
    a_vars, b_vars = free_vars(a_e) - {kv.name}, free_vars(b_e) - {kv.name}
    coords = [(v.name, v.extent) for v in k.coords]
    cols = [c for c in coords if c[0] in b_vars and c[0] not in a_vars]
    batch = [c for c in coords if c[0] in a_vars and c[0] in b_vars]
    rows = [c for c in coords if c not in cols and c not in batch]
    return GemmParts(dot, a_e, b_e, kv, rows, cols, batch)


def gemm_dims(k: Kernel) -> tuple[int, int, int, int]:
    """(M, N, K, batch) of a matmul kernel as `split_gemm` takes it apart."""
    g = split_gemm(k)
    return (math.prod(e for _, e in g.rows), math.prod(e for _, e in g.cols), g.k.extent,
            math.prod(e for _, e in g.batch))


def row_split(k: Kernel) -> tuple[tuple[Var, ...], tuple[Var, ...]] | None:
    """(row coordinates, column coordinates) of a kernel whose every reduction depends on output
    coordinates alone: the row coordinates are those some reduction reads. None otherwise."""
    reds = k.reductions()
    if not reds or any(r.op in ("dot", "argmax", "argmin") for r in reds):
        return None
    names = {v.name for v in k.coords}
    memo: dict[int, frozenset[str]] = {}
    used: set[str] = set()
    for r in reds:
        fv = free_vars(r, memo)
        if not fv <= names:
            return None
        used |= fv
    return tuple(v for v in k.coords if v.name in used), tuple(v for v in k.coords if v.name not in used)


def _cost(e: Expr, seen: set[int]) -> int:
    """Operations to evaluate `e` once: loads and ops count one; a reduction repeats its body over its
    extent, except inner reductions that do not read its axes (templates compute those once). A node
    in `seen` is already computed (templates name shared values)."""
    if id(e) in seen:
        return 0
    seen.add(id(e))
    if isinstance(e, Reduce):
        mine = {v.name for v in e.axes}
        hoisted = [r for r in walk(e.body) if isinstance(r, Reduce) and r is not e and not free_vars(r) & mine]
        outside = sum(_cost(r, seen) for r in hoisted)
        return outside + math.prod(v.extent for v in e.axes) * (_cost(e.body, set(seen)) + 1)
    return 1 + sum(_cost(c, seen) for c in children(e) if not isinstance(c, (Var, Const)))


def work(k: Kernel) -> int:
    """Operations a kernel performs as the templates run it: every output element evaluates the
    expression, except that a row-fused kernel computes its reductions once per row."""
    if k.kind == "rownorm" and (rs := row_split(k)) is not None:
        rows = math.prod(v.extent for v in rs[0])
        reds = k.reductions()
        nested = {id(x) for o in reds for x in walk(o.body) if isinstance(x, Reduce) and x is not o}
        seen: set[int] = set()
        per_row = sum(_cost(r, seen) for r in reds if id(r) not in nested)  # outermost: each costs its nest
        return rows * per_row + k.out.numel * _cost(k.expr, {id(r) for r in reds})
    return k.out.numel * _cost(k.expr, set())
