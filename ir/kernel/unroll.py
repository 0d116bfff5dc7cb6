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
from collections.abc import Callable
from dataclasses import replace

from .build import iop
from .ir import Const, Expr, IOp, Kernel, KernelProgram, Load, Op, Reduce, Rewrite, Scan, Var, walk

WINDOW_MAX = 27  # positions (a 3x3x3 window); wider reductions keep a reduce template
BODY_MAX = 1200  # sub-expressions in body x positions: larger unrolls would bloat the kernel (a padded
# 3x3x3 average pool, 27 x 43, fits: unrolled it ran 3x its reduce template on the CPU)
COMBINE = {"sum": "add", "max": "maximum", "min": "minimum", "prod": "mul"}
PICK = {"argmax": "gt", "argmin": "lt"}  # an arg reduction's test of a position against the best so far
FLOATS = ("f16", "bf16", "f32", "f64")


def _small(r: Reduce, chains: bool = True) -> bool:
    n = math.prod(v.extent for v in r.axes)
    inner = [x for x in walk(r.body) if isinstance(x, (Reduce, Scan))]
    return (r.op in COMBINE or chains and r.op in PICK) and 1 <= n <= WINDOW_MAX and not inner and \
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


def _picked(r: Reduce) -> Expr:
    """An arg reduction as a chain over the positions in order: a position replaces the best so far where it
    is strictly better, or NaN where the best is not (torch: NaN is the extreme, the first among equals
    wins). Each step's best and index are nodes the next step shares (printed once)."""
    best: Expr | None = None
    index: Expr = Const(0, r.dtype)
    for k, pos in enumerate(itertools.product(*(range(v.extent) for v in r.axes))):
        v = _Subst({a.name: p for a, p in zip(r.axes, pos)})(r.body)
        if best is None:
            best = v
            continue
        take: Expr = Op(PICK[r.op], (v, best), (), "bool")
        if v.dtype in FLOATS:
            # x != x: NaN's test in every DSL's rules (no isnan rule in C)
            fresh_nan = Op("logical_and", (Op("ne", (v, v), (), "bool"), Op("eq", (best, best), (), "bool")), (),
                           "bool")
            take = Op("logical_or", (take, fresh_nan), (), "bool")
        best = Op("where", (take, v, best), (), v.dtype)
        index = Op("where", (take, Const(k, r.dtype), index), (), r.dtype)
    return index


def _unrolled(r: Reduce) -> Expr:
    if r.op in PICK:
        return _picked(r)
    terms = []
    for pos in itertools.product(*(range(v.extent) for v in r.axes)):
        terms.append(_cast(_Subst({v.name: p for v, p in zip(r.axes, pos)})(r.body), r.dtype))
    while len(terms) > 1:  # a balanced tree: short dependency chains
        terms = [Op(COMBINE[r.op], (terms[i], terms[i + 1]), (), r.dtype) if i + 1 < len(terms) else terms[i]
                 for i in range(0, len(terms), 2)]
    return terms[0]


class _Unroller(Rewrite):
    def __init__(self, chains: bool) -> None:
        super().__init__()
        self.chains = chains

    def _go(self, e: Expr) -> Expr:
        if isinstance(e, Reduce):
            return _unrolled(e) if _small(e, self.chains) else e
        if isinstance(e, Op):
            args = tuple(self(a) for a in e.args)
            return e if all(a is b for a, b in zip(args, e.args)) else replace(e, args=args)
        if isinstance(e, IOp):  # index arithmetic on a reduction's result (a pool's argmax as a position)
            a, b = self(e.a), self(e.b)
            if e.op in ("//", "%") and isinstance(b, Const):  # no vector division: each choice divided here
                mapped = _on_choices(a, lambda x: iop(e.op, x, b))
                if mapped is not None:
                    return mapped
            return e if a is e.a and b is e.b else iop(e.op, a, b)
        return e


def _on_choices(e: Expr, f: Callable[[Expr], Expr]) -> Expr | None:
    """`f` applied to each constant an unrolled arg reduction's chain of `where`s can yield (the chain with
    `f`'s results in their places); None where `e` is not such a chain."""
    if isinstance(e, Const):
        return f(e)
    if isinstance(e, Op) and e.op == "where" and isinstance(e.args[1], Const):
        rest = _on_choices(e.args[2], f)
        if rest is None:
            return None
        return Op("where", (e.args[0], f(e.args[1]), rest), (), rest.dtype)
    return None


def unroll_windows(k: Kernel, chains: bool = True) -> Kernel:
    """A reduce kernel whose every reduction is a small window, as a pointwise kernel; others as they are.
    Without `chains` an arg reduction keeps its template (a backend whose names bind expressions would
    build a chain's shared steps again at each use: `Capabilities.inlined_values`)."""
    if k.kind != "reduce" or not all(_small(r, chains) for r in k.reductions()):
        return k
    unroll = _Unroller(chains)
    expr = unroll(k.expr)
    also = tuple((b, unroll(e)) for b, e in k.also)  # a pool's values beside its positions
    if any(isinstance(x, (Reduce, Scan)) for root in (expr, *(e for _, e in also)) for x in walk(root)):
        return k  # a reduction under a load's index
    return replace(k, kind="pointwise", expr=expr, also=also)


def unroll_program(prog: KernelProgram, chains: bool = True) -> KernelProgram:
    return replace(prog, steps=[unroll_windows(s, chains) if isinstance(s, Kernel) else s for s in prog.steps])
