"""The interior of a padded window: the range of the innermost coordinate where every masked load of a
pointwise kernel is in bounds, given that the row's own conditions hold.

A padded pooling window or stencil masks each load at the edges. A mask is control flow (or a gather)
that keeps a CPU loop scalar; inside the interior the masks are known true, so a backend can run the
mask-free expression there (contiguous or strided loads, a vectorised loop) and the masked one only at
the edges and on edge rows. The conditions are read from the masks themselves: comparisons joined by
`and`, each on the innermost coordinate alone (evaluated at every column) or on the row's coordinates
alone (checked once per row). The mask-free expression is exact wherever both hold.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from .ir import Const, Expr, IOp, Kernel, Load, Op, Rewrite, Var, free_vars, walk


@dataclass(frozen=True)
class Interior:
    lo: int  # the innermost coordinate's range [lo, hi) where every column condition holds
    hi: int
    row_conditions: tuple[Expr, ...]  # conditions on the row's coordinates alone: all true for `expr`
    expr: Expr  # the kernel's value with every mask condition true (no masked load left)
    also: tuple[Expr, ...] = ()  # the kernel's other stored values (`Kernel.also`'s), likewise


def _atoms(mask: Expr, out: list[Expr]) -> None:
    if isinstance(mask, IOp) and mask.op == "and":
        _atoms(mask.a, out)
        _atoms(mask.b, out)
    else:
        out.append(mask)


class _NotAffine(Exception):
    pass


_NP = {"+": np.add, "-": np.subtract, "*": np.multiply, "min": np.minimum, "max": np.maximum,
       "<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal, "==": np.equal,
       "!=": np.not_equal, "and": np.logical_and, "or": np.logical_or}


def _grid_value(e: Expr, env: dict[str, np.ndarray]) -> np.ndarray:
    """Index arithmetic over a grid of its variables' values; a division or remainder only of values
    that are never negative (where C's and Python's rounding agree)."""
    if isinstance(e, Var) and e.name in env:
        return env[e.name]
    if isinstance(e, Const) and isinstance(e.value, (int, bool)):
        return np.asarray(int(e.value))
    if isinstance(e, IOp) and (e.op in _NP or e.op in ("//", "%")):
        a, b = _grid_value(e.a, env), _grid_value(e.b, env)
        if e.op in _NP:
            return _NP[e.op](a, b)
        if (a < 0).any() or (b <= 0).any():
            raise _NotAffine
        return a // b if e.op == "//" else a % b
    raise _NotAffine


class _Unmask(Rewrite):
    """The expression with the given conditions replaced by true; a load whose mask is then true
    loses its mask."""

    def __init__(self, atoms: set[int]) -> None:
        super().__init__()
        self.atoms = atoms

    def _go(self, e: Expr) -> Expr:
        if id(e) in self.atoms:
            return Const(True, "bool")
        if isinstance(e, IOp) and e.op == "and":
            a, b = self(e.a), self(e.b)
            if isinstance(a, Const) and a.value is True:
                return b
            if isinstance(b, Const) and b.value is True:
                return a
            return e if a is e.a and b is e.b else replace(e, a=a, b=b)
        if isinstance(e, IOp):  # index arithmetic over values (a pool's position from its argmax chain)
            a, b = self(e.a), self(e.b)
            return e if a is e.a and b is e.b else replace(e, a=a, b=b)
        if isinstance(e, Load) and e.mask is not None:
            mask = self(e.mask)
            if isinstance(mask, Const) and mask.value is True:
                return replace(e, mask=None)
            return e if mask is e.mask else replace(e, mask=mask)
        if isinstance(e, Op):
            args = tuple(self(a) for a in e.args)
            return e if all(a is b for a, b in zip(args, e.args)) else replace(e, args=args)
        return e


def interior(k: Kernel) -> Interior | None:
    """The interior along a pointwise kernel's last coordinate; None where it has no masked load, a
    condition mixes the column with the row or is not index arithmetic, or the interior is empty."""
    if k.kind != "pointwise" or not k.coords:
        return None
    col = k.coords[-1]
    n = col.extent
    if not isinstance(n, int):
        return None
    atoms: list[Expr] = []
    for root in (k.expr, *(e for _, e in k.also)):  # a pool's values and positions: masks apart, alike
        for e in walk(root):
            if isinstance(e, Load) and e.mask is not None:
                _atoms(e.mask, atoms)
    if not atoms:
        return None
    memo: dict[int, frozenset[str]] = {}
    ok, cols = np.ones(n, dtype=bool), {col.name: np.arange(n)}
    rows: dict[int, Expr] = {}
    for a in atoms:
        names = free_vars(a, memo)
        if col.name not in names:
            rows[id(a)] = a
            continue
        if names != {col.name}:
            return None
        try:
            ok &= np.broadcast_to(_grid_value(a, cols), (n,)).astype(bool)
        except _NotAffine:
            return None
    # the longest run of columns where every column condition holds
    best, start = (0, 0), None
    for c in range(n + 1):
        if c < n and ok[c]:
            start = c if start is None else start
        elif start is not None:
            best = max(best, (start, c), key=lambda r: r[1] - r[0])
            start = None
    if best[1] - best[0] <= 0:
        return None
    unmask = _Unmask({id(a) for a in atoms})  # one rewrite: what the values share stays shared
    return Interior(best[0], best[1], tuple(rows.values()), unmask(k.expr), tuple(unmask(e) for _, e in k.also))


@dataclass(frozen=True)
class RowInterior:
    """Where an implicit GEMM's A operand (a window over a padded input) needs no mask: for each condition of
    its masks, a table over the row coordinates it reads of whether it holds at every K index (a row where
    all of them do is inside the padding for its whole window), and A with every condition true."""

    tables: tuple[tuple[tuple[str, ...], tuple[int, ...], tuple[bool, ...]], ...]  # (row vars, extents, flags)
    expr: Expr


def row_interior(a: Expr, k: Var, rows: list[tuple[str, int]], limit: int = 1 << 14) -> RowInterior | None:
    """The row interior of a GEMM's A operand over reduction axis `k` and row coordinates `rows`; None where
    A has no masked load, a condition reads anything else or is not index arithmetic, a table would pass
    `limit` entries, or no row is inside."""
    if not isinstance(k.extent, int):
        return None
    atoms: list[Expr] = []
    for e in walk(a):
        if isinstance(e, Load) and e.mask is not None:
            _atoms(e.mask, atoms)
    if not atoms:
        return None
    extents = dict(rows)
    tables: dict[tuple[str, ...], np.ndarray] = {}  # the conditions over the same row coordinates, joined
    for atom in atoms:
        names = free_vars(atom)
        rv = tuple(n for n, _ in rows if n in names)
        shape = tuple(extents[n] for n in rv)
        if names - set(rv) - {k.name} or not all(isinstance(s, int) for s in shape) or math.prod(shape) > limit:
            return None
        grid = np.meshgrid(*[np.arange(s) for s in shape], np.arange(k.extent), indexing="ij")
        try:
            holds = np.broadcast_to(_grid_value(atom, dict(zip((*rv, k.name), grid))), grid[0].shape).all(axis=-1)
        except _NotAffine:
            return None
        tables[rv] = holds & tables[rv] if rv in tables else holds
    if not all(t.any() for t in tables.values()):
        return None
    flags = tuple((rv, tuple(int(x) for x in t.shape), tuple(bool(h) for h in t.ravel()))
                  for rv, t in tables.items() if not t.all())  # a condition true for every row needs no table
    return RowInterior(flags, _Unmask({id(x) for x in atoms})(a))
