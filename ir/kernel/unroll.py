"""Small windows as pointwise kernels: a reduction over a few elements (a pooling window, a sum over 3
channels) written out as a tree of the combining op over the body at each window position.

A reduce template spends a program (and a row of lanes) on each output and leaves most lanes idle when
the window is 4 or 9 elements wide; as a pointwise kernel every lane computes one output, the window
unrolled. The value is the same expression
(the kernel interpreter checks it); only the summation order of a sum changes.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import replace

from .build import iop
from .ir import Const, Expr, IOp, Kernel, KernelProgram, Load, Op, Reduce, Rewrite, Scan, Var, walk

WINDOW_MAX = 27  # positions (a 3x3x3 window); wider reductions keep a reduce template
BODY_MAX = 400  # sub-expressions in body x positions: larger unrolls would bloat the kernel
COMBINE = {"sum": "add", "max": "maximum", "min": "minimum", "prod": "mul"}


def _small(r: Reduce) -> bool:
    n = math.prod(v.extent for v in r.axes)
    inner = [x for x in walk(r.body) if isinstance(x, (Reduce, Scan))]
    return r.op in COMBINE and 1 <= n <= WINDOW_MAX and not inner and \
        n * sum(1 for _ in walk(r.body)) <= BODY_MAX


class _Subst(Rewrite):
    """`e` with variables bound to constants; integer arithmetic on constants folded."""

    def __init__(self, env: dict[str, int]) -> None:
        super().__init__()
        self.env = env

    def _go(self, e: Expr) -> Expr:
        if isinstance(e, Var):
            return Const(self.env[e.name], e.dtype) if e.name in self.env else e
        if isinstance(e, IOp):  # rebuilt by `iop`, which folds constants (floor // and %) and identities
            a, b = self(e.a), self(e.b)
            return e if a is e.a and b is e.b else iop(e.op, a, b)
        if isinstance(e, Load):
            idx = tuple(self(i) for i in e.index)
            mask = self(e.mask) if e.mask is not None else None
            return replace(e, index=idx, mask=mask)
        if isinstance(e, Op):
            return replace(e, args=tuple(self(a) for a in e.args))
        return e


def _cast(e: Expr, dtype: str) -> Expr:
    return e if e.dtype == dtype else Op("cast", (e,), (("dtype", dtype),), dtype)


def _unrolled(r: Reduce) -> Expr:
    terms = []
    for pos in itertools.product(*(range(v.extent) for v in r.axes)):
        terms.append(_cast(_Subst({v.name: p for v, p in zip(r.axes, pos)})(r.body), r.dtype))
    while len(terms) > 1:  # a balanced tree: short dependency chains
        terms = [Op(COMBINE[r.op], (terms[i], terms[i + 1]), (), r.dtype) if i + 1 < len(terms) else terms[i]
                 for i in range(0, len(terms), 2)]
    return terms[0]


class _Unroller(Rewrite):
    def _go(self, e: Expr) -> Expr:
        if isinstance(e, Reduce):
            return _unrolled(e) if _small(e) else e
        if isinstance(e, Op):
            args = tuple(self(a) for a in e.args)
            return e if all(a is b for a, b in zip(args, e.args)) else replace(e, args=args)
        return e


def unroll_windows(k: Kernel) -> Kernel:
    """A reduce kernel whose every reduction is a small window, as a pointwise kernel; others as they are."""
    if k.kind != "reduce" or not all(_small(r) for r in k.reductions()):
        return k
    expr = _Unroller()(k.expr)
    if any(isinstance(x, (Reduce, Scan)) for x in walk(expr)):  # a reduction under a load's index
        return k
    return replace(k, kind="pointwise", expr=expr)


def unroll_program(prog: KernelProgram) -> KernelProgram:
    return replace(prog, steps=[unroll_windows(s) if isinstance(s, Kernel) else s for s in prog.steps])
