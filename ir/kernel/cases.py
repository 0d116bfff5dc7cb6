"""Row cases of a pointwise kernel: a concatenation along an outer axis (DenseNet's growing feature map)
reads each source under a mask on the row's coordinates alone, and the masks of different sources never
hold together, so the window interior (`ir.kernel.interior`), which wants every mask true at once, is
empty. Evaluated over the rows, the masks' conditions fall into a few patterns; in each, every condition
is a known constant, and the kernel's value folds to the one source that row reads, unmasked: a backend
branches once per row and sweeps its columns with contiguous loads, where the masked expression loads
every source at a clamped index (a gather each) and selects.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from .interior import _atoms, _grid_value, _NotAffine
from .ir import Const, Expr, IOp, Kernel, Load, Op, Rewrite, free_vars, walk

COMPARISONS = frozenset({"<", "<=", ">", ">=", "==", "!="})
MAX_CASES = 8
MAX_ROWS = 1 << 14  # grid points the conditions are evaluated on


@dataclass(frozen=True)
class RowCase:
    """One pattern of the row conditions: each condition with its value here, and the kernel's values
    (`Kernel.expr`, `Kernel.also`'s) folded under it."""

    holds: tuple[tuple[Expr, bool], ...]
    expr: Expr
    also: tuple[Expr, ...] = ()


class _Fold(Rewrite):
    """Conditions replaced by their known values (matched by structure: a `where`'s test and a load's mask
    are separate nodes alike), then folded: `and`/`or` with a constant, a `where` on a constant, a load
    whose mask is true (unmasked) or false (its `other`)."""

    def __init__(self, values: dict[Expr, bool]) -> None:
        super().__init__()
        self.values = values

    def _go(self, e: Expr) -> Expr:
        if isinstance(e, IOp) and e.op in COMPARISONS and e in self.values:
            return Const(self.values[e], "bool")
        if isinstance(e, IOp) and e.op in ("and", "or"):
            a, b = self(e.a), self(e.b)
            for x, y in ((a, b), (b, a)):
                if isinstance(x, Const) and isinstance(x.value, bool):
                    return (y if x.value else x) if e.op == "and" else (x if x.value else y)
            return e if a is e.a and b is e.b else replace(e, a=a, b=b)
        if isinstance(e, Load) and e.mask is not None:
            mask = self(e.mask)
            if isinstance(mask, Const) and mask.value is False:
                return Const(e.other, e.dtype)
            index = tuple(self(i) for i in e.index)
            return replace(e, index=index, mask=None if isinstance(mask, Const) and mask.value is True else mask)
        if isinstance(e, Op) and e.op == "where":
            test = self(e.args[0])
            if isinstance(test, Const) and isinstance(test.value, bool):
                return self(e.args[1] if test.value else e.args[2])
        return self.rebuild(e)


def _conditions(k: Kernel) -> list[Expr]:
    """The comparisons a kernel's masks and `where` index tests join, each once (by structure); [] where
    one is not a comparison of index arithmetic."""
    found: list[Expr] = []
    for root in (k.expr, *(e for _, e in k.also)):
        for e in walk(root):
            if isinstance(e, Load) and e.mask is not None:
                _atoms(e.mask, found)
            elif isinstance(e, Op) and e.op == "where" and isinstance(e.args[0], IOp):
                _atoms(e.args[0], found)
    atoms = list(dict.fromkeys(found))
    return atoms if all(isinstance(a, IOp) and a.op in COMPARISONS for a in atoms) else []


def row_cases(k: Kernel) -> list[RowCase]:
    """The row cases of a pointwise kernel, every row in exactly one (the first whose conditions hold); []
    where its masks and `where` tests have a condition on the last coordinate or one that is not index
    arithmetic, the rows' grid is too large, or there are fewer than 2 or more than MAX_CASES patterns."""
    if k.kind != "pointwise" or not k.coords:
        return []
    col = k.coords[-1].name
    atoms = _conditions(k)
    if not atoms:
        return []
    memo: dict[int, frozenset[str]] = {}
    names = set().union(*(free_vars(a, memo) for a in atoms))
    extents = {v.name: v.extent for v in k.coords}
    if col in names or not names <= extents.keys() or not all(isinstance(extents[n], int) for n in names):
        return []
    order = [v.name for v in k.coords if v.name in names]
    if math.prod(extents[n] for n in order) > MAX_ROWS:
        return []
    grid = np.meshgrid(*[np.arange(extents[n]) for n in order], indexing="ij")
    env = dict(zip(order, (g.ravel() for g in grid)))
    try:
        table = np.stack([np.broadcast_to(_grid_value(a, env), grid[0].size).astype(bool) for a in atoms])
    except _NotAffine:
        return []
    patterns = list(dict.fromkeys(tuple(bool(x) for x in table[:, j]) for j in range(table.shape[1])))
    if not 2 <= len(patterns) <= MAX_CASES:
        return []
    cases = []
    for pat in patterns:
        fold = _Fold(dict(zip(atoms, pat)))
        cases.append(RowCase(tuple(zip(atoms, pat)), fold(k.expr), tuple(fold(e) for _, e in k.also)))
    return cases


def column_cases(k: Kernel) -> list[tuple[int, int, RowCase]]:
    """A concatenation along the last axis (a channels-last feature map joined from several sources): the
    runs of columns over which every mask and `where` condition keeps one value, each with the kernel's
    values folded there, in column order; [] where a condition reads any other coordinate or is not index
    arithmetic, or there are fewer than 2 or more than MAX_CASES runs."""
    if k.kind != "pointwise" or not k.coords or not isinstance(k.coords[-1].extent, int):
        return []
    col, n = k.coords[-1].name, k.coords[-1].extent
    atoms = _conditions(k)
    memo: dict[int, frozenset[str]] = {}
    if not atoms or any(free_vars(a, memo) != {col} for a in atoms):
        return []
    try:
        table = np.stack([np.broadcast_to(_grid_value(a, {col: np.arange(n)}), n).astype(bool) for a in atoms])
    except _NotAffine:
        return []
    runs, start = [], 0
    for c in range(1, n + 1):
        if c == n or (table[:, c] != table[:, start]).any():
            runs.append((start, c))
            start = c
    if not 2 <= len(runs) <= MAX_CASES:
        return []
    out = []
    for lo, hi in runs:
        pat = tuple(bool(x) for x in table[:, lo])
        fold = _Fold(dict(zip(atoms, pat)))
        out.append((lo, hi, RowCase(tuple(zip(atoms, pat)), fold(k.expr), tuple(fold(e) for _, e in k.also))))
    return out
