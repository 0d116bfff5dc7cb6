"""Triton's op table (the primitives plus its overrides), the scope that renders expressions inside a
template (bindings, masks, accumulators), and the helpers every Triton template shares."""

from __future__ import annotations

import math

from ir.kernel.ir import Const, Expr, IOp, Kernel, Load, Op, Reduce, Scan, Var, index_bounds, size_args

from ..base import UnsupportedKernel
from ..exprs import FLOATS, Printer, comp, free_vars, py_const

TL = {"f16": "tl.float16", "bf16": "tl.bfloat16", "f32": "tl.float32", "f64": "tl.float64", "i8": "tl.int8",
      "i16": "tl.int16", "i32": "tl.int32", "i64": "tl.int64", "u8": "tl.uint8", "bool": "tl.int1"}
# helpers every module defines once (no libdevice: it is missing under the interpreter)
PRELUDE = '''
def _akg_interpreted_bf16_dot():
    # Triton's interpreter (3.6) multiplies bf16 dot operands as their uint16 bits: under it, they are
    # widened to fp32 first, exactly as a tensor core forms their products (the kernels are unchanged)
    import os
    if os.environ.get("TRITON_INTERPRET") != "1":
        return
    try:
        import numpy as np
        from triton.runtime import interpreter as ti
        dot = ti.InterpreterBuilder.create_dot
    except (ImportError, AttributeError):
        return
    if getattr(dot, "_akg", False):
        return

    def wide(h):
        if h.dtype.scalar != tl.bfloat16:
            return h
        return ti.TensorHandle(ti._convert_float(h.data, tl.bfloat16, tl.float32, None).view(np.float32),
                               tl.float32)

    def create_dot(self, a, b, d, *rest):
        return dot(self, wide(a), wide(b), d, *rest)

    create_dot._akg = True
    ti.InterpreterBuilder.create_dot = create_dot


_akg_interpreted_bf16_dot()
# a compiled kernel may bound a loop by its program id; the interpreter (3.6) cannot take such a bound
_AKG_COMPILED = __import__("os").environ.get("TRITON_INTERPRET") != "1"

@triton.jit
def _akg_tanh(x):
    e = tl.exp(-2.0 * tl.abs(x))
    t = (1.0 - e) / (1.0 + e)
    return tl.where(x < 0, -t, t)


@triton.jit
def _akg_bf16(x):  # fp32 rounded to the nearest bf16 (even on ties), kept in fp32
    u = x.to(tl.float32).to(tl.uint32, bitcast=True)
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return u.to(tl.float32, bitcast=True)


@triton.jit
def _akg_mul(a, b):
    return a * b


@triton.jit
def _akg_round(x):  # round half to even, as torch.round
    r = tl.floor(x + 0.5)
    tie = (r - x) == 0.5
    odd = (r - 2.0 * tl.floor(r * 0.5)) != 0.0
    return tl.where(tie & odd, r - 1.0, r)
'''
MAX_SINGLE_PASS = 16384  # reduction extent handled by one tile; longer rows loop over chunks


def _f(args: list[str], i: int, e: Op) -> str:
    """Operand i cast to the op's compute type when it is a float op."""
    a = e.args[i]
    if e.op == "where" and i == 0:
        return args[i]  # the condition stays boolean
    if comp(e.dtype) in FLOATS and a.dtype != comp(e.dtype) and not isinstance(a, Const):
        return f"{args[i]}.to({TL[comp(e.dtype)]})"
    return args[i]


# the composites Triton spells itself (its intrinsics); every other composite reaches the table
# expanded into primitives (ir.kernel.expand)
OVERRIDES = frozenset({"sigmoid", "rsqrt"})


def render_op(e: Op, args: list[str]) -> str:
    """The primitives plus `OVERRIDES`, in Triton."""
    a = [_f(args, i, e) for i in range(len(args))]
    o = e.op
    simple = {"add": "({0} + {1})", "sub": "({0} - {1})", "mul": "({0} * {1})", "eq": "({0} == {1})",
              "ne": "({0} != {1})", "lt": "({0} < {1})", "le": "({0} <= {1})", "gt": "({0} > {1})",
              "ge": "({0} >= {1})", "logical_and": "(({0} != 0) & ({1} != 0))",
              "logical_or": "(({0} != 0) | ({1} != 0))", "neg": "(-{0})", "abs": "tl.abs({0})",
              "exp": "tl.exp({0})", "log": "tl.log({0})", "sqrt": "tl.sqrt({0})", "rsqrt": "tl.rsqrt({0})",
              "sin": "tl.sin({0})", "cos": "tl.cos({0})", "tanh": "_akg_tanh({0})",
              "sigmoid": "tl.sigmoid({0})", "erf": "tl.erf({0})", "floor": "tl.floor({0})", "ceil": "tl.ceil({0})",
              "round": "_akg_round({0})", "logical_not": "({0} == 0)", "where": "tl.where({0}, {1}, {2})",
              "pow": "tl.exp({1} * tl.log({0}))"}
    if o in simple:
        return simple[o].format(*a)
    if o == "div":
        if e.dtype in FLOATS:
            return f"({a[0]} / {a[1]})"
        raise UnsupportedKernel("integer division")
    if o in ("maximum", "minimum"):
        f = "tl.maximum" if o == "maximum" else "tl.minimum"
        # torch propagates NaN from either side
        return f"tl.where({a[0]} != {a[0]}, {a[0]}, tl.where({a[1]} != {a[1]}, {a[1]}, {f}({a[0]}, {a[1]})))" \
            if e.dtype in FLOATS else f"{f}({a[0]}, {a[1]})"
    if o == "remainder":
        return f"({a[0]} - tl.floor({a[0]} / {a[1]}) * {a[1]})" if e.dtype in FLOATS else \
            f"((({a[0]} % {a[1]}) + {a[1]}) % {a[1]})"
    if o == "cast":
        to = dict(e.attrs)["dtype"]
        if to == "bf16":  # round explicitly: the interpreter's conversion truncates
            return f"_akg_bf16({args[0]})"
        return f"({args[0]}).to({TL[to]})" if to != "bool" else f"({args[0]} != 0)"
    raise UnsupportedKernel(f"Triton renderer has no rule for op {o!r}")


IOPS = {"+": "({0} + {1})", "-": "({0} - {1})", "*": "({0} * {1})", "//": "({0} // {1})", "%": "({0} % {1})",
        "min": "tl.minimum({0}, {1})", "max": "tl.maximum({0}, {1})", "<": "({0} < {1})", "<=": "({0} <= {1})",
        "==": "({0} == {1})", "!=": "({0} != {1})", ">=": "({0} >= {1})", ">": "({0} > {1})",
        "and": "({0} & {1})", "or": "({0} | {1})"}


class Ctx:
    """Variable bindings and masks for one scope of a template. Each mask guards a set of variables;
    a load takes the masks of the variables it depends on (a load of no variable is a scalar)."""

    def __init__(self, env: dict[str, str], masks: list[tuple[frozenset[str], str]],
                 accs: dict[int, str] | None = None, own_masks: bool = False,
                 evict: tuple[frozenset[str], str] | None = None) -> None:
        self.env, self.masks = env, masks
        self.accs = accs or {}
        self.fv: dict[int, frozenset[str]] = {}
        self.bounds: dict[int, tuple[float, float]] = {}
        self.own_masks = own_masks  # a reduction masks by its axes and rows only (row template)
        # (row variables, policy): the L2 eviction hint of loads of a row's own data (a row template's
        # sweeps: kept for the sweeps after, dropped by the last)
        self.evict = evict

    def mask_for(self, vs: frozenset[str]) -> str:
        return " & ".join(m for mvars, m in self.masks if mvars & vs)

    def render(self, e: Expr, p: Printer) -> str:
        if isinstance(e, Var):
            return self.env[e.name]
        if isinstance(e, Const):
            return py_const(e.value, e.dtype)
        if isinstance(e, IOp):
            lo = index_bounds(e.a, self.bounds)[0] if e.op in ("//", "%") else 0
            if lo < 0 and math.isfinite(lo) and isinstance(e.b, Const) and int(e.b.value) > 0:
                # Triton's axis analysis of // and % assumes non-negative operands (triton#7749): a
                # negative index in lanes a mask discards made the H100 mis-vectorise the kept lanes'
                # loads. A multiple of the divisor added first keeps every operand >= 0, and gives
                # the kernel IR's floor semantics in every lane (Triton's own are C's truncation).
                b = int(e.b.value)
                k = -(int(lo) // b)  # ceil(-lo / b)
                shifted = f"({p(e.a)} + {k * b})"
                return f"({shifted} // {b} - {k})" if e.op == "//" else f"({shifted} % {b})"
            return IOPS[e.op].format(p(e.a), p(e.b))
        if isinstance(e, Load):
            strides = e.buf.strides()
            flat = " + ".join(f"({p(i)}) * {s}" if s != 1 else f"({p(i)})" for i, s in zip(e.index, strides)) or "0"
            vs = free_vars(e, self.fv)
            if not vs and e.mask is None:
                return f"tl.load({e.buf.name} + ({flat}))"
            mask = self.mask_for(vs)
            if e.mask is not None:
                mask = f"{mask} & ({p(e.mask)})" if mask else f"({p(e.mask)})"
            if not mask:  # its variables are each covered exactly (a grid axis): nothing to mask
                return f"tl.load({e.buf.name} + ({flat}))"
            other = py_const(e.other, e.buf.dtype)
            hint = f", eviction_policy=\"{self.evict[1]}\"" if self.evict and vs & self.evict[0] else ""
            return f"tl.load({e.buf.name} + ({flat}), mask={mask}, other={other}{hint})"
        if isinstance(e, Op):
            return render_op(e, [p(a) for a in e.args])
        if isinstance(e, Reduce):
            if id(e) in self.accs:
                return self.accs[id(e)]
            return self.reduce(e, p)
        if isinstance(e, Scan) and id(e) in self.accs:  # the scan template's running values
            return self.accs[id(e)]
        raise UnsupportedKernel(type(e).__name__)

    def reduce_mask(self, e: Reduce) -> str:
        """The lanes a reduction folds: a row template's by its own axes and the rows only, else every mask."""
        if self.own_masks:
            return "(" + self.mask_for(free_vars(e.body, self.fv) | {v.name for v in e.axes}) + ")"
        return "(" + " & ".join(m for _, m in self.masks) + ")"

    def lanes(self, e: Reduce, p: Printer) -> str:
        """A sum's, maximum's or minimum's operand tile with the lanes it does not fold set to its identity:
        what a tile accumulator takes each step (`reduction`'s strided sweep), folded across once at the end."""
        body = p(e.body)
        if comp(e.body.dtype) in FLOATS and e.body.dtype != comp(e.body.dtype):
            body = f"{body}.to(tl.float32)"
        return f"tl.where({self.reduce_mask(e)}, {body}, {FOLD_IDENTITY[e.op]})"

    def reduce(self, e: Reduce, p: Printer) -> str:
        m = self.reduce_mask(e)
        body = p(e.body)
        if comp(e.body.dtype) in FLOATS and e.body.dtype != comp(e.body.dtype):
            body = f"{body}.to(tl.float32)"
        if e.op in ("sum", "dot"):
            return f"tl.sum(tl.where({m}, {body}, 0.0), axis=1, keep_dims=True)"
        if e.op == "prod":
            return f"tl.reduce(tl.where({m}, {body}, 1.0), 1, _akg_mul, keep_dims=True)"
        fill = {"max": 'float("-inf")', "min": 'float("inf")', "argmax": 'float("-inf")', "argmin": 'float("inf")'}
        f = {"max": "tl.max", "min": "tl.min", "argmax": "tl.argmax", "argmin": "tl.argmin"}[e.op]
        out = f"{f}(tl.where({m}, {body}, {fill[e.op]}), axis=1, keep_dims=True)"
        return f"({out}).to(tl.int64)" if e.op.startswith("arg") else out


FOLD_IDENTITY = {"sum": "0.0", "max": 'float("-inf")', "min": 'float("inf")'}
FOLD = {"sum": "tl.sum", "max": "tl.max", "min": "tl.min"}


def store_value(val: str, dtype: str, shape: str) -> str:
    """`val` broadcast to the tile and converted to the output type (constants included)."""
    if dtype == "bool":
        return f"(tl.full({shape}, 0, tl.int32) + ({val}).to(tl.int32) != 0)" if not val[0].isupper() else \
            f"tl.full({shape}, {val}, tl.int1)"
    zero = "0.0" if dtype in FLOATS else "0"
    full = f"(tl.full({shape}, {zero}, {TL[comp(dtype)]}) + {val})"
    return f"_akg_bf16({full}).to(tl.bfloat16)" if dtype == "bf16" else f"{full}.to({TL[dtype]})"


def signature(k: Kernel, extra: list[str]) -> str:
    sizes = size_args(k)
    args = [b.name for b in k.inputs()] + ["out_ptr", *(b.name for b, _ in k.also), *sizes] + extra
    # a run-time size of 1 must not become a constant (Triton specialises integer arguments equal to 1)
    jit = f"@triton.jit(do_not_specialize={list(sizes)!r})" if sizes else "@triton.jit"
    return f"{jit}\ndef {k.name}({', '.join(args)}):"
