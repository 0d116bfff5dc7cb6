"""Reductions over adjacent contiguous axes as one axis. A mean over (H, W) reads each row of H x W
elements contiguously, yet as two nested axes a renderer loops H times over W (56 elements: three
and a half vectors and a horizontal sum each time); as one axis of H x W it streams the row. Allowed
where every use of the axes is a whole run of a load's index, over dimensions of the same extents, in
order; the merged axis indexes them by quotient and remainder, which the renderers' flat index folds
back into the contiguous offset. The value and the visiting order are the same (arg-max/min record the
same row-major position)."""

from __future__ import annotations

import math
from dataclasses import replace

from .build import ic, iop
from .ir import Expr, Kernel, KernelProgram, Load, Reduce, Rewrite, Var, children

MERGED_OPS = ("sum", "max", "min", "prod", "argmax", "argmin")


def _runs_only(body: Expr, axes: tuple[Var, ...]) -> bool:
    """Every use of `axes` in `body` is a whole run of a load's index over dimensions of their extents."""
    names, n, ext = {v.name for v in axes}, len(axes), tuple(v.extent for v in axes)
    memo: dict[int, bool] = {}

    def clean(e: Expr) -> bool:
        if id(e) in memo:
            return memo[id(e)]
        if isinstance(e, Var):
            ok = e.name not in names
        elif isinstance(e, Load):
            at = [i for i, x in enumerate(e.index) if isinstance(x, Var) and x.name in names]
            rest = e.index
            if at:
                j = at[0]
                ok = e.index[j:j + n] == axes and tuple(e.buf.shape[j:j + n]) == ext
                rest = e.index[:j] + e.index[j + n:]
            else:
                ok = True
            ok = ok and all(clean(x) for x in rest) and (e.mask is None or clean(e.mask))
        else:
            ok = all(clean(c) for c in children(e))
        memo[id(e)] = ok
        return ok

    return clean(body)


def row_major_parts(flat: Var, extents: tuple[int, ...]) -> tuple[Expr, ...]:
    """The coordinates, over dimensions of `extents`, of the row-major position `flat`."""
    parts: list[Expr] = []
    for i in range(len(extents)):
        inner = math.prod(extents[i + 1:])
        q = iop("//", flat, ic(inner)) if inner > 1 else flat
        parts.append(iop("%", q, ic(extents[i])) if i else q)
    return tuple(parts)


class _Merge(Rewrite):
    def __init__(self, axes: tuple[Var, ...], flat: Var) -> None:
        super().__init__()
        self.axes, self.flat = axes, flat
        self.parts = row_major_parts(flat, tuple(v.extent for v in axes))

    def _go(self, e: Expr) -> Expr:
        e = self.rebuild(e)
        if isinstance(e, Load) and self.axes[0] in e.index:
            j = e.index.index(self.axes[0])
            return replace(e, index=(*e.index[:j], *self.parts, *e.index[j + len(self.axes):]))
        return e


class _Reductions(Rewrite):
    def _go(self, e: Expr) -> Expr:
        e = self.rebuild(e)
        if (isinstance(e, Reduce) and e.op in MERGED_OPS and len(e.axes) > 1
                and all(isinstance(v.extent, int) for v in e.axes) and _runs_only(e.body, e.axes)):
            flat = Var("_".join(v.name for v in e.axes), math.prod(v.extent for v in e.axes))
            return replace(e, body=_Merge(e.axes, flat)(e.body), axes=(flat,))
        return e


def flatten_reductions(k: Kernel) -> Kernel:
    """`k` with each reduction over adjacent contiguous axes over one axis (reduce kernels only: a row
    kernel's templates match its reductions' axes against the row's coordinates)."""
    if k.kind != "reduce":
        return k
    rw = _Reductions()
    expr = rw(k.expr)
    return k if expr is k.expr else replace(k, expr=expr, also=tuple((b, rw(e)) for b, e in k.also))


def flatten_program(prog: KernelProgram) -> KernelProgram:
    return replace(prog, steps=[flatten_reductions(s) if isinstance(s, Kernel) else s for s in prog.steps])
