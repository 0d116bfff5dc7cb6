"""Scalar TIR expressions for TileLang kernels: the pointwise op table, typed constants, and a printer
that names temporaries (Python assignments inside a T.Parallel body become let-bindings)."""

from __future__ import annotations

import math
from typing import Any

from ir.kernel.ir import Const, Expr, IOp, Load, Op, Reduce, Var
from ir.sym import is_dynamic

from ..base import UnsupportedKernel
from ..exprs import FLOATS, Printer, comp

TIR = {"f16": "float16", "bf16": "bfloat16", "f32": "float32", "f64": "float64", "i8": "int8", "i16": "int16",
       "i32": "int32", "i64": "int64", "u8": "uint8", "bool": "uint8"}


def const(value: Any, dtype: str) -> str:
    t = TIR[comp(dtype)]
    if dtype == "bool":
        return "T.bool(True)" if value else "T.bool(False)"
    if dtype in FLOATS:
        v = float(value)
        if math.isnan(v):
            return f'T.{t}(float("nan"))'
        if math.isinf(v):
            return f'{"-" if v < 0 else ""}T.infinity("{t}")'
        return f"T.{t}({v!r})"
    return f"T.{t}({value if is_dynamic(value) else int(value)})"


def _truth(x: str, dtype: str) -> str:
    return x if dtype == "bool" else f"({x} != {const(0, dtype)})"


# the composites TileLang spells itself (its intrinsics); every other composite reaches the table
# expanded into primitives (ir.kernel.expand)
OVERRIDES = frozenset({"sigmoid", "rsqrt", "log1p", "trunc", "isnan"})


def render_op(e: Op, a: list[str]) -> str:
    """The primitives plus `OVERRIDES`, in TileLang's TIR."""
    dt = comp(e.dtype)
    x = a[0] if a else ""
    ite = "T.if_then_else"
    simple = {"add": "({0} + {1})", "sub": "({0} - {1})", "mul": "({0} * {1})", "eq": "({0} == {1})",
              "ne": "({0} != {1})", "lt": "({0} < {1})", "le": "({0} <= {1})", "gt": "({0} > {1})",
              "ge": "({0} >= {1})", "neg": "(-{0})", "exp": "T.exp({0})", "log": "T.log({0})",
              "sqrt": "T.sqrt({0})", "rsqrt": "T.rsqrt({0})", "sin": "T.sin({0})", "cos": "T.cos({0})",
              "tanh": "T.tanh({0})", "sigmoid": "T.sigmoid({0})", "erf": "T.erf({0})", "floor": "T.floor({0})",
              "ceil": "T.ceil({0})", "round": "T.nearbyint({0})", "trunc": "T.trunc({0})",
              "isnan": "T.isnan({0})", "log1p": "T.log1p({0})", "pow": "T.pow({0}, {1})",
              "where": ite + "({0}, {1}, {2})"}
    o = e.op
    if o in simple:
        return simple[o].format(*a)
    args = e.args
    if o == "logical_and":
        return f"T.And({_truth(a[0], args[0].dtype)}, {_truth(a[1], args[1].dtype)})"
    if o == "logical_or":
        return f"T.Or({_truth(a[0], args[0].dtype)}, {_truth(a[1], args[1].dtype)})"
    if o == "logical_not":
        return f"T.Not({_truth(x, args[0].dtype)})"
    if o == "abs":  # (the C target has no fabs)
        return f"{ite}({x} < {const(0, dt)}, -{x}, {x})" if dt in FLOATS else f"T.abs({x})"
    if o == "div":
        if dt not in FLOATS:
            raise UnsupportedKernel("integer division")
        return f"({a[0]} / {a[1]})"
    if o in ("maximum", "minimum"):
        f = "T.max" if o == "maximum" else "T.min"
        if dt not in FLOATS:
            return f"{f}({a[0]}, {a[1]})"
        # torch propagates NaN from either side
        return f"{ite}({a[0]} != {a[0]}, {a[0]}, {ite}({a[1]} != {a[1]}, {a[1]}, {f}({a[0]}, {a[1]})))"
    if o == "remainder":  # TIR's % on integers is already floor-mod, as torch's
        return f"({a[0]} - T.floor({a[0]} / {a[1]}) * {a[1]})" if dt in FLOATS else f"({a[0]} % {a[1]})"
    if o == "cast":
        to = dict(e.attrs)["dtype"]
        if to == "bool":
            return _truth(x, args[0].dtype)
        if to == "bf16":  # the value a bf16 tensor would hold, kept in fp32
            return f"LD16(ST16({x}))"
        if to == "f16":
            return f'T.Cast("float32", T.Cast("float16", {x}))'
        return f'T.Cast("{TIR[to]}", {x})'
    raise UnsupportedKernel(f"TileLang renderer has no rule for op {o!r}")


IOPS = {"+": "({0} + {1})", "-": "({0} - {1})", "*": "({0} * {1})", "//": "({0} // {1})", "%": "({0} % {1})",
        "min": "T.min({0}, {1})", "max": "T.max({0}, {1})", "<": "({0} < {1})", "<=": "({0} <= {1})",
        "==": "({0} == {1})", "!=": "({0} != {1})", ">=": "({0} >= {1})", ">": "({0} > {1})",
        "and": "T.And({0}, {1})", "or": "T.Or({0}, {1})"}


class Scope:
    """Renders expressions inside one T.Parallel body: variables bound by the template, reductions bound
    to accumulator fragments. Buffers are flat 1-D tensors; a masked load reads nothing where masked."""

    def __init__(self, env: dict[str, str], accs: dict[int, str] | None = None) -> None:
        self.env, self.accs = env, accs or {}

    def render(self, e: Expr, p: Printer) -> str:
        if isinstance(e, Var):
            return self.env[e.name]
        if isinstance(e, Const):
            return const(e.value, e.dtype)
        if isinstance(e, IOp):
            return IOPS[e.op].format(p(e.a), p(e.b))
        if isinstance(e, Load):
            strides = e.buf.strides()
            flat = " + ".join(f"{p(i)} * {s}" if s != 1 else p(i) for i, s in zip(e.index, strides)) or "0"
            v = f"g_{e.buf.name}[{flat}]"
            if e.buf.dtype == "bf16":
                v = f"LD16({v})"
            elif e.buf.dtype == "bool":  # bool buffers travel as bytes (the C target mistypes bool*)
                v = f"({v} != T.uint8(0))"
            elif e.buf.dtype == "f16":
                v = f'T.Cast("float32", {v})'
            if e.mask is not None:
                v = f"T.if_then_else({p(e.mask)}, {v}, {const(e.other, e.buf.dtype)})"
            return v
        if isinstance(e, Op):
            return render_op(e, [p(a) for a in e.args])
        if isinstance(e, Reduce):
            return self.accs[id(e)]
        raise UnsupportedKernel(type(e).__name__)


# bf16 helpers a kernel factory defines when it touches bf16: the C target has no bf16, so there its
# buffers are raw 16-bit words, widened by a shift and narrowed with round-to-nearest-even
BF16_HELPERS = """\
BF16 = "bfloat16" if gpu else "uint16"

def LD16(v):
    return T.Cast("float32", v) if gpu else T.reinterpret("float32", T.shift_left(T.Cast("uint32", v), T.uint32(16)))

def ST16(v):
    if gpu:
        return T.Cast("bfloat16", v)
    u = T.reinterpret("uint32", v)
    odd = T.bitwise_and(T.shift_right(u, T.uint32(16)), T.uint32(1))
    return T.Cast("uint16", T.shift_right(u + T.uint32(0x7FFF) + odd, T.uint32(16)))
"""


def store(val: str, dtype: str) -> str:
    """A computed value converted to the output buffer's element type."""
    if dtype == "bool":
        return f'T.Cast("uint8", {val})'
    if dtype == "bf16":
        return f"ST16({val})"
    return f'T.Cast("{TIR[dtype]}", {val})'
