"""Composite pointwise ops expanded into primitives, once, on the kernel IR, before any renderer sees
them (tinygrad's decompositions are the model). Each DSL's op table then spells only the primitives,
plus the composites it keeps as overrides where its intrinsic is faster or more accurate (a native
`sigmoid`, `log1p`, ...): those are the `keep` set of `expand_program`.

Every formula follows torch's definition (the graph interpreter runs torch's own op), and the kernel
interpreter checks the expanded program against the graph interpreter on every suite problem."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from ..types import FLOAT_DTYPES as FLOATS
from .build import op
from .ir import Const, Expr, IOp, Kernel, KernelProgram, Load, Op, Reduce, Rewrite, Scan, walk

# the primitives every DSL's table spells (besides integer index arithmetic, loads and reductions)
PRIMITIVES = frozenset(
    "add sub mul div neg abs exp log sqrt sin cos tanh erf floor ceil round maximum minimum pow atan2 "
    "remainder eq ne lt le gt ge logical_and logical_or logical_not where cast".split())


class _B:
    """Builds the expansion of one op: constants and ops in the op's own dtype."""

    def __init__(self, e: Op) -> None:
        self.dt = e.dtype

    def c(self, v: float) -> Const:
        return Const(v if self.dt in FLOATS else int(v), self.dt)

    def __call__(self, name: str, *args: Expr) -> Op:
        return op(name, list(args), self.dt)

    def cmp(self, name: str, a: Expr, b: Expr) -> Op:
        return op(name, [a, b], "bool")

    def where(self, cond: Expr, a: Expr, b: Expr) -> Op:
        return op("where", [cond, a, b], self.dt)


Rule = Callable[[Op, _B, dict[str, Any]], Expr | None]


def _x(e: Op) -> Expr:
    return e.args[0]


def _gelu(e: Op, b: _B, at: dict[str, Any]) -> Expr:
    x = _x(e)
    if at["approximate"] == "tanh":
        cube = b("mul", b("mul", b("mul", b.c(0.044715), x), x), x)
        inner = b("mul", b.c(0.7978845608028654), b("add", x, cube))
        return b("mul", b("mul", b.c(0.5), x), b("add", b.c(1.0), b("tanh", inner)))
    return b("mul", b("mul", b.c(0.5), x), b("add", b.c(1.0), b("erf", b("mul", x, b.c(0.7071067811865476)))))


def _softplus(e: Op, b: _B, at: dict[str, Any]) -> Expr:
    x, beta = _x(e), b.c(at["beta"])
    bx = b("mul", x, beta)
    return b.where(b.cmp("gt", bx, b.c(at["threshold"])), x, b("div", b("log1p", b("exp", bx)), beta))


def _mish(e: Op, b: _B, at: dict[str, Any]) -> Expr:
    x = _x(e)
    sp = b.where(b.cmp("gt", x, b.c(20.0)), x, b("log1p", b("exp", x)))
    return b("mul", x, b("tanh", sp))


def _elu(e: Op, b: _B, at: dict[str, Any]) -> Expr:
    x = _x(e)
    neg = b("mul", b.c(at["scale"] * at["alpha"]), b("expm1", b("mul", x, b.c(at["input_scale"]))))
    return b.where(b.cmp("gt", x, b.c(0.0)), b("mul", b.c(at["scale"]), x), neg)


def _selu(e: Op, b: _B, at: dict[str, Any]) -> Expr:
    x = _x(e)
    return b.where(b.cmp("gt", x, b.c(0.0)), b("mul", b.c(1.0507009873554805), x),
                   b("mul", b.c(1.7580993408473766), b("expm1", x)))


def _clamp(lo: float | None, hi: float | None) -> Callable[[Op, _B], Expr]:
    def rule(e: Op, b: _B) -> Expr:
        out = _x(e)  # NaN compares false both ways and stays NaN, as in torch
        if lo is not None:
            out = b.where(b.cmp("lt", out, b.c(lo)), b.c(lo), out)
        if hi is not None:
            out = b.where(b.cmp("gt", out, b.c(hi)), b.c(hi), out)
        return out
    return rule


def _hardsigmoid(x: Expr, b: _B) -> Expr:
    return b("minimum", b("maximum", b("add", b("div", x, b.c(6.0)), b.c(0.5)), b.c(0.0)), b.c(1.0))


def _pow(e: Op, b: _B, at: dict[str, Any]) -> Expr | None:
    """Small integer and one-half exponents as products and a square root (exact where pow's
    exp(y log x) spelling is not, e.g. a negative base); other exponents stay `pow`."""
    x, ex = e.args
    if not isinstance(ex, Const) or e.dtype not in FLOATS:
        return None
    v = float(ex.value)
    if v == 0.5:
        return b("sqrt", x)
    if not v.is_integer() or abs(v) > 8:
        return None
    n = int(v)
    if n == 0:  # torch: x ** 0 == 1 for every x, NaN included
        return b.c(1.0)
    prod: Expr = x
    for _ in range(abs(n) - 1):
        prod = b("mul", prod, x)
    return b("div", b.c(1.0), prod) if n < 0 else prod


def _div(e: Op, b: _B, at: dict[str, Any]) -> Expr | None:
    mode = at.get("rounding_mode")
    if mode is None or e.dtype not in FLOATS:
        return None
    return b(mode, b("div", *e.args))


RULES: dict[str, Rule] = {
    # x <= 0 -> 0 keeps NaN (the comparison is false) and maps -inf to 0 (x * 0 would make it NaN)
    "relu": lambda e, b, at: b.where(b.cmp("le", _x(e), b.c(0.0)), b.c(0.0), _x(e)),
    "leaky_relu": lambda e, b, at: b.where(b.cmp("gt", _x(e), b.c(0.0)), _x(e),
                                           b("mul", _x(e), b.c(at["negative_slope"]))),
    "sigmoid": lambda e, b, at: b("div", b.c(1.0), b("add", b.c(1.0), b("exp", b("neg", _x(e))))),
    "silu": lambda e, b, at: b("mul", _x(e), b("sigmoid", _x(e))),
    "gelu": _gelu,
    "softplus": _softplus,
    "mish": _mish,
    "elu": _elu,
    "selu": _selu,
    "clamp": lambda e, b, at: _clamp(at["min"], at["max"])(e, b),
    "hardtanh": lambda e, b, at: _clamp(at["min_val"], at["max_val"])(e, b),
    "hardsigmoid": lambda e, b, at: _hardsigmoid(_x(e), b),
    "hardswish": lambda e, b, at: b("div", b("mul", _x(e), b("minimum", b("maximum", b("add", _x(e), b.c(3.0)),
                                                                                b.c(0.0)), b.c(6.0))), b.c(6.0)),
    "sign": lambda e, b, at: b.where(b.cmp("gt", _x(e), b.c(0.0)), b.c(1.0), b.where(
        b.cmp("lt", _x(e), b.c(0.0)), b.c(-1.0), b("mul", _x(e), b.c(0.0)))),
    "reciprocal": lambda e, b, at: b("div", b.c(1.0), _x(e)),
    "rsqrt": lambda e, b, at: b("div", b.c(1.0), b("sqrt", _x(e))),
    "expm1": lambda e, b, at: b("sub", b("exp", _x(e)), b.c(1.0)),
    "log1p": lambda e, b, at: b("log", b("add", b.c(1.0), _x(e))),
    "trunc": lambda e, b, at: b.where(b.cmp("ge", _x(e), b.c(0.0)), b("floor", _x(e)), b("ceil", _x(e))),
    "isnan": lambda e, b, at: b.cmp("ne", _x(e), _x(e)),
    "pow": _pow,
    "div": _div,
}
COMPOSITES = frozenset(RULES) - PRIMITIVES  # pow and div expand only in some forms


class _Expander(Rewrite):
    def __init__(self, keep: frozenset[str]) -> None:
        super().__init__()
        self.keep = keep

    def _go(self, e: Expr) -> Expr:
        if isinstance(e, Op):
            args = tuple(self(a) for a in e.args)
            new = e if all(a is b for a, b in zip(args, e.args)) else replace(e, args=args)
            rule = RULES.get(new.op) if new.op not in self.keep else None
            out = rule(new, _B(new), dict(new.attrs)) if rule else None
            return new if out is None else self(out)  # an expansion may use other composites
        # a node whose children come back unchanged is returned itself: an expansion re-walks nodes
        # already expanded, and a copy there would split a shared sub-tree (a GEMM read by two mish)
        if isinstance(e, Load):
            idx = tuple(self(i) for i in e.index)
            mask = self(e.mask) if e.mask is not None else None
            same = all(a is b for a, b in zip(idx, e.index)) and mask is e.mask
            return e if same else replace(e, index=idx, mask=mask)
        if isinstance(e, IOp):
            a, b = self(e.a), self(e.b)
            return e if a is e.a and b is e.b else replace(e, a=a, b=b)
        if isinstance(e, Reduce):
            body = self(e.body)
            return e if body is e.body else replace(e, body=body)
        if isinstance(e, Scan):
            body, at = self(e.body), self(e.at)
            return e if body is e.body and at is e.at else replace(e, body=body, at=at)
        return e


def expand_kernel(k: Kernel, keep: frozenset[str] = frozenset()) -> Kernel:
    """`k` with every composite op outside `keep` written in primitives (shared sub-trees stay shared)."""
    return replace(k, expr=_Expander(keep)(k.expr))


def expand_program(prog: KernelProgram, keep: frozenset[str] = frozenset()) -> KernelProgram:
    steps = [expand_kernel(s, keep) if isinstance(s, Kernel) else s for s in prog.steps]
    return replace(prog, steps=steps)


def composites_left(k: Kernel, keep: frozenset[str]) -> set[str]:
    """Ops of `k` a renderer with primitives plus `keep` cannot spell (a missed expansion)."""
    return {e.op for e in walk(k.expr) if isinstance(e, Op) and e.op in COMPOSITES and e.op not in keep}

