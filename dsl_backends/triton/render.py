"""Kernel IR -> Triton source: pointwise, row-reduction and GEMM (grouped tile order) templates."""

from __future__ import annotations

import math
from typing import Any

from ir.kernel.ir import Const, Expr, IOp, Kernel, Load, Op, Reduce, Scan, Var, index_bounds

from ..base import UnsupportedKernel
from ..exprs import FLOATS, Printer, comp, free_vars, pow2, py_const, py_decode, row_coords, row_reduction
from . import tma

TL = {"f16": "tl.float16", "bf16": "tl.bfloat16", "f32": "tl.float32", "f64": "tl.float64", "i8": "tl.int8",
      "i16": "tl.int16", "i32": "tl.int32", "i64": "tl.int64", "u8": "tl.uint8", "bool": "tl.int1"}
# helpers every module defines once (no libdevice: it is missing under the interpreter)
PRELUDE = '''
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


def _pow(e: Op, a: str, b: str) -> str:
    ex = e.args[1]
    if isinstance(ex, Const) and float(ex.value).is_integer() and abs(ex.value) <= 8:
        n = int(ex.value)
        if n == 0:
            return f"({a} * 0.0 + 1.0)"
        body = " * ".join([f"({a})"] * abs(n))
        return f"(1.0 / ({body}))" if n < 0 else f"({body})"
    if isinstance(ex, Const) and ex.value == 0.5:
        return f"tl.sqrt({a})"
    return f"tl.exp({b} * tl.log({a}))"


def render_op(e: Op, args: list[str]) -> str:
    at = dict(e.attrs)
    a = [_f(args, i, e) for i in range(len(args))]
    x = a[0] if a else ""
    o = e.op
    simple = {"add": "({0} + {1})", "sub": "({0} - {1})", "mul": "({0} * {1})", "eq": "({0} == {1})",
              "ne": "({0} != {1})", "lt": "({0} < {1})", "le": "({0} <= {1})", "gt": "({0} > {1})",
              "ge": "({0} >= {1})", "logical_and": "(({0} != 0) & ({1} != 0))",
              "logical_or": "(({0} != 0) | ({1} != 0))", "neg": "(-{0})", "abs": "tl.abs({0})",
              "exp": "tl.exp({0})", "log": "tl.log({0})", "sqrt": "tl.sqrt({0})", "rsqrt": "tl.rsqrt({0})",
              "reciprocal": "(1.0 / {0})", "sin": "tl.sin({0})", "cos": "tl.cos({0})", "tanh": "_akg_tanh({0})",
              "sigmoid": "tl.sigmoid({0})", "erf": "tl.erf({0})", "floor": "tl.floor({0})", "ceil": "tl.ceil({0})",
              "round": "_akg_round({0})", "logical_not": "({0} == 0)", "isnan": "({0} != {0})",
              "log1p": "tl.log(1.0 + {0})", "expm1": "(tl.exp({0}) - 1.0)",
              "trunc": "tl.where({0} >= 0, tl.floor({0}), tl.ceil({0}))",
              "sign": "tl.where({0} > 0, 1.0, tl.where({0} < 0, -1.0, {0} * 0.0))",
              "relu": "tl.where({0} > 0, {0}, {0} * 0.0)", "silu": "({0} * tl.sigmoid({0}))",
              "hardsigmoid": "tl.minimum(tl.maximum({0} / 6.0 + 0.5, 0.0), 1.0)",
              "hardswish": "({0} * tl.minimum(tl.maximum({0} + 3.0, 0.0), 6.0) / 6.0)",
              "where": "tl.where({0}, {1}, {2})"}
    if o in simple:
        return simple[o].format(*a)
    if o == "div":
        if e.dtype in FLOATS:
            q = f"({a[0]} / {a[1]})"
            return {None: q, "floor": f"tl.floor({q})", "trunc": f"tl.where({q} >= 0, tl.floor({q}), tl.ceil({q}))"}[
                at.get("rounding_mode")]
        raise UnsupportedKernel("integer division")
    if o == "pow":
        return _pow(e, a[0], a[1])
    if o in ("maximum", "minimum"):
        f = "tl.maximum" if o == "maximum" else "tl.minimum"
        # torch propagates NaN from either side
        return f"tl.where({a[0]} != {a[0]}, {a[0]}, tl.where({a[1]} != {a[1]}, {a[1]}, {f}({a[0]}, {a[1]})))" \
            if e.dtype in FLOATS else f"{f}({a[0]}, {a[1]})"
    if o == "remainder":
        return f"({a[0]} - tl.floor({a[0]} / {a[1]}) * {a[1]})" if e.dtype in FLOATS else \
            f"((({a[0]} % {a[1]}) + {a[1]}) % {a[1]})"
    if o == "gelu":
        if at["approximate"] == "tanh":
            return f"(0.5 * {x} * (1.0 + _akg_tanh(0.7978845608028654 * ({x} + 0.044715 * {x} * {x} * {x}))))"
        return f"(0.5 * {x} * (1.0 + tl.erf({x} * 0.7071067811865476)))"
    if o == "softplus":
        b, th = at["beta"], at["threshold"]
        return f"tl.where({x} * {b!r} > {th!r}, {x}, tl.log(1.0 + tl.exp({x} * {b!r})) / {b!r})"
    if o == "mish":
        sp = f"tl.where({x} > 20.0, {x}, tl.log(1.0 + tl.exp({x})))"
        return f"({x} * _akg_tanh({sp}))"
    if o == "elu":
        return (f"tl.where({x} > 0, {at['scale']!r} * {x}, "
                f"{at['scale'] * at['alpha']!r} * (tl.exp({x} * {at['input_scale']!r}) - 1.0))")
    if o == "selu":
        return f"tl.where({x} > 0, 1.0507009873554805 * {x}, 1.7580993408473766 * (tl.exp({x}) - 1.0))"
    if o == "leaky_relu":
        return f"tl.where({x} > 0, {x}, {x} * {at['negative_slope']!r})"
    if o in ("clamp", "hardtanh"):
        lo, hi = (at["min"], at["max"]) if o == "clamp" else (at["min_val"], at["max_val"])
        out = x
        if lo is not None:
            out = f"tl.where({out} < {lo!r}, {lo!r} + {out} * 0, {out})"
        if hi is not None:
            out = f"tl.where({out} > {hi!r}, {hi!r} + {out} * 0, {out})"
        return out
    if o == "cast":
        if at["dtype"] == "bf16":  # round explicitly: the interpreter's conversion truncates
            return f"_akg_bf16({args[0]})"
        return f"({args[0]}).to({TL[at['dtype']]})" if at["dtype"] != "bool" else f"({args[0]} != 0)"
    raise UnsupportedKernel(f"Triton renderer has no rule for op {o!r}")


IOPS = {"+": "({0} + {1})", "-": "({0} - {1})", "*": "({0} * {1})", "//": "({0} // {1})", "%": "({0} % {1})",
        "min": "tl.minimum({0}, {1})", "max": "tl.maximum({0}, {1})", "<": "({0} < {1})", "<=": "({0} <= {1})",
        "==": "({0} == {1})", "!=": "({0} != {1})", ">=": "({0} >= {1})", ">": "({0} > {1})",
        "and": "({0} & {1})", "or": "({0} | {1})"}


class _Ctx:
    """Variable bindings and masks for one scope of a template. Each mask guards a set of variables;
    a load takes the masks of the variables it depends on (a load of no variable is a scalar)."""

    def __init__(self, env: dict[str, str], masks: list[tuple[frozenset[str], str]],
                 accs: dict[int, str] | None = None, own_masks: bool = False) -> None:
        self.env, self.masks = env, masks
        self.accs = accs or {}
        self.fv: dict[int, frozenset[str]] = {}
        self.bounds: dict[int, tuple[float, float]] = {}
        self.own_masks = own_masks  # a reduction masks by its axes and rows only (row template)

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
            other = py_const(e.other, e.buf.dtype)
            return f"tl.load({e.buf.name} + ({flat}), mask={mask}, other={other})"
        if isinstance(e, Op):
            return render_op(e, [p(a) for a in e.args])
        if isinstance(e, Reduce):
            if id(e) in self.accs:
                return self.accs[id(e)]
            return self.reduce(e, p)
        if isinstance(e, Scan) and id(e) in self.accs:  # the scan template's running values
            return self.accs[id(e)]
        raise UnsupportedKernel(type(e).__name__)

    def reduce(self, e: Reduce, p: Printer) -> str:
        if self.own_masks:
            m = "(" + self.mask_for(free_vars(e.body, self.fv) | {v.name for v in e.axes}) + ")"
        else:
            m = "(" + " & ".join(m for _, m in self.masks) + ")"
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


def _store_value(val: str, dtype: str, shape: str) -> str:
    """`val` broadcast to the tile and converted to the output type (constants included)."""
    if dtype == "bool":
        return f"(tl.full({shape}, 0, tl.int32) + ({val}).to(tl.int32) != 0)" if not val[0].isupper() else \
            f"tl.full({shape}, {val}, tl.int1)"
    zero = "0.0" if dtype in FLOATS else "0"
    full = f"(tl.full({shape}, {zero}, {TL[comp(dtype)]}) + {val})"
    return f"_akg_bf16({full}).to(tl.bfloat16)" if dtype == "bf16" else f"{full}.to({TL[dtype]})"


def render_kernel(k: Kernel, sched: dict[str, Any]) -> str:
    if k.kind == "pointwise":
        return _pointwise(k, sched)
    if k.kind == "reduce":
        return _reduction(k, sched)
    if k.kind == "rownorm":
        return _rownorm(k, sched)
    if k.kind == "scan":
        from .scan import render_scan

        return render_scan(k, sched)
    return _matmul(k, sched)


def _signature(k: Kernel, extra: list[str]) -> str:
    args = [b.name for b in k.inputs()] + ["out_ptr"] + extra
    return f"@triton.jit\ndef {k.name}({', '.join(args)}):"


def _pointwise(k: Kernel, sched: dict[str, Any]) -> str:
    n = k.out.numel
    lines = ["pid = tl.program_id(0)", "offs = pid * BLOCK + tl.arange(0, BLOCK)", f"dmask = offs < {n}"]
    env: dict[str, str] = {}
    py_decode([(v.name, v.extent) for v in k.coords], "offs", lines, env)
    ctx = _Ctx(env, [(frozenset(v.name for v in k.coords), "dmask")])
    p = Printer(ctx.render)
    val = p(k.expr)
    lines += p.lines
    lines.append(f"tl.store(out_ptr + offs, {_store_value(val, k.out.dtype, '[BLOCK]')}, mask=dmask)")
    return _signature(k, ["BLOCK: tl.constexpr"]) + "\n" + "\n".join("    " + ln for ln in lines) + "\n"


def _reduction(k: Kernel, sched: dict[str, Any]) -> str:
    rr = row_reduction(k, sched, MAX_SINGLE_PASS)
    reds, red, rows, single = rr.reds, rr.red, rr.rows, rr.single
    head = ["pid = tl.program_id(0)", "rows = pid * BM + tl.arange(0, BM)[:, None]", f"rmask = rows < {rows}"]
    env: dict[str, str] = {}
    py_decode([(v.name, v.extent) for v in k.coords], "rows", head, env)
    red_vars = frozenset(v.name for r in reds for v in r.axes)
    row_vars = frozenset(v.name for v in k.coords)

    def bind_red(lines: list[str], jexpr: str) -> None:
        lines.append(f"j = {jexpr}")
        lines.append(f"jmask = j < {red}")
        for r in reds:
            py_decode([(v.name, v.extent) for v in r.axes], "j", lines, env)

    body: list[str] = []
    if single:
        bind_red(body, "tl.arange(0, BR)[None, :]")
        ctx = _Ctx(env, [(row_vars, "rmask"), (red_vars, "jmask")])
        p = Printer(ctx.render)
        val = p(k.expr)
        body += p.lines
    else:
        accs: dict[int, str] = {}
        init = {"sum": "0.0", "dot": "0.0", "max": 'float("-inf")', "min": 'float("inf")', "prod": "1.0"}
        for i, r in enumerate(reds):
            accs[id(r)] = f"acc{i}"
            body.append(f"acc{i} = tl.full([BM, 1], {init[r.op]}, tl.float32)")
        body.append(f"for start in range(0, {red}, BR):")
        inner: list[str] = []
        bind_red(inner, "start + tl.arange(0, BR)[None, :]")
        ctx = _Ctx(env, [(row_vars, "rmask"), (red_vars, "jmask")])
        p = Printer(ctx.render, prefix="u")
        for i, r in enumerate(reds):
            part = p(r)
            comb = {"sum": "{a} + {p}", "dot": "{a} + {p}", "max": "tl.maximum({a}, {p})",
                    "min": "tl.minimum({a}, {p})", "prod": "{a} * {p}"}[r.op]
            p.lines.append(f"acc{i} = " + comb.format(a=f"acc{i}", p=part))
        inner += p.lines
        body += ["    " + ln for ln in inner]
        ctx2 = _Ctx(env, [(row_vars, "rmask")], accs)
        p2 = Printer(ctx2.render, prefix="v")
        val = p2(k.expr)
        body += p2.lines
    body.append(f"tl.store(out_ptr + rows, {_store_value(val, k.out.dtype, '[BM, 1]')}, mask=rmask)")
    src = _signature(k, ["BM: tl.constexpr", "BR: tl.constexpr"]) + "\n"
    return src + "\n".join("    " + ln for ln in head + body) + "\n"


def _rownorm(k: Kernel, sched: dict[str, Any]) -> str:
    """A row-fused kernel (softmax, norms): each program owns BM rows; every reduction depends on the
    rows alone. When a row fits one tile, the row is loaded once and every reduction and the output
    reuse it (one read, one write); otherwise each reduction sweeps the row in BR chunks, inner ones
    first, and a last sweep writes the output."""
    row_c, cols = row_coords(k)
    n, rows = math.prod(e for _, e in cols), math.prod(v.extent for v in row_c)
    reds = list(dict.fromkeys(k.reductions()))
    br = sched["BR"]
    single = all(pow2(math.prod(v.extent for v in r.axes)) <= br for r in reds) and pow2(n) <= br
    head = ["pid = tl.program_id(0)", "rows = pid * BM + tl.arange(0, BM)[:, None]", f"rmask = rows < {rows}"]
    env: dict[str, str] = {}
    py_decode([(v.name, v.extent) for v in row_c], "rows", head, env)
    row_vars = frozenset(v.name for v in row_c)
    out_shape = "[BM, BR]" if cols else "[BM, 1]"

    def bind(lines: list[str], axes: tuple[Var, ...] | list[tuple[str, int]], j: str, masks: list) -> None:
        # a reduction over the output's column shape shares the column names (and so its loads)
        named = [(a.name, a.extent) if isinstance(a, Var) else a for a in axes]
        ext = math.prod(e for _, e in named)
        if [e for _, e in named] == [e for _, e in cols] and all(c in env for c, _ in cols):
            for (name, _), (c, _) in zip(named, cols):
                env[name] = env[c]
            masks.append((frozenset(nm for nm, _ in named), "cmask"))
            return
        mask = f"jm{ext}"
        if mask not in {m for _, m in masks}:
            lines.append(f"{mask} = {j} < {ext}")
        py_decode(named, j, lines, env)
        masks.append((frozenset(nm for nm, _ in named), mask))

    def store(lines: list[str], val: str) -> None:
        flat = " + ".join(f"{env[v.name]} * {st}" if st != 1 else env[v.name]
                          for v, st in zip(k.coords, k.out.strides())) or "0"
        mask = "rmask & cmask" if cols else "rmask"
        lines.append(f"tl.store(out_ptr + ({flat}), {_store_value(val, k.out.dtype, out_shape)}, mask={mask})")

    body: list[str] = []
    if single:
        masks: list[tuple[frozenset[str], str]] = [(row_vars, "rmask")]
        body.append("j = tl.arange(0, BR)[None, :]")
        if cols:
            body.append(f"cmask = j < {n}")
            py_decode(cols, "j", body, env)
            masks.append((frozenset(c for c, _ in cols), "cmask"))
        for r in reds:
            bind(body, r.axes, "j", masks)
        p = Printer(_Ctx(env, masks, own_masks=True).render, dedupe=True)
        val = p(k.expr)
        body += p.lines
        store(body, val)
    else:
        accs: dict[int, str] = {}
        init = {"sum": "0.0", "max": 'float("-inf")', "min": 'float("inf")', "prod": "1.0"}
        comb = {"sum": "{a} + {p}", "max": "tl.maximum({a}, {p})", "min": "tl.minimum({a}, {p})", "prod": "{a} * {p}"}
        for i, r in enumerate(reds):  # children first: an inner reduction is an accumulator by now
            ext = math.prod(v.extent for v in r.axes)
            body += [f"acc{i} = tl.full([BM, 1], {init[r.op]}, tl.float32)",
                     f"for start in range(0, {ext}, BR):", "    j = start + tl.arange(0, BR)[None, :]"]
            inner: list[str] = []
            masks = [(row_vars, "rmask")]
            bind(inner, r.axes, "j", masks)
            p = Printer(_Ctx(env, masks, dict(accs), own_masks=True).render, prefix=f"u{i}_", dedupe=True)
            part = p(r)
            inner += p.lines + [f"acc{i} = " + comb[r.op].format(a=f"acc{i}", p=part)]
            body += ["    " + ln for ln in inner]
            accs[id(r)] = f"acc{i}"
        if cols:
            body += [f"for start in range(0, {n}, BR):", "    j = start + tl.arange(0, BR)[None, :]"]
            inner = [f"cmask = j < {n}"]
            py_decode(cols, "j", inner, env)
            masks = [(row_vars, "rmask"), (frozenset(c for c, _ in cols), "cmask")]
        else:
            inner, masks = [], [(row_vars, "rmask")]
        p = Printer(_Ctx(env, masks, accs).render, prefix="v", dedupe=True)
        val = p(k.expr)
        inner += p.lines
        store(inner, val)
        body += ["    " + ln for ln in inner] if cols else inner
    src = _signature(k, ["BM: tl.constexpr", "BR: tl.constexpr"]) + "\n"
    return src + "\n".join("    " + ln for ln in head + body) + "\n"


def _matmul(k: Kernel, sched: dict[str, Any]) -> str:
    (dot,) = [r for r in k.reductions() if r.op == "dot"] or [None]
    if dot is None or len(k.reductions()) != 1 or not isinstance(dot.body, Op) or dot.body.op != "mul":
        raise UnsupportedKernel("not a single GEMM")
    a_e, b_e = dot.body.args
    fv: dict[int, frozenset[str]] = {}
    kname = dot.axes[0].name
    a_vars, b_vars = free_vars(a_e, fv) - {kname}, free_vars(b_e, fv) - {kname}
    coords = [(v.name, v.extent) for v in k.coords]
    m_vars = [c for c in coords if c[0] in a_vars and c[0] not in b_vars]
    n_vars = [c for c in coords if c[0] in b_vars and c[0] not in a_vars]
    b_vars_ = [c for c in coords if c not in m_vars and c not in n_vars]
    M, N, K = math.prod(e for _, e in m_vars), math.prod(e for _, e in n_vars), dot.axes[0].extent
    B = math.prod(e for _, e in b_vars_)
    head = ["pid = tl.program_id(0)", "bid = tl.program_id(1)",
            f"num_m = tl.cdiv({M}, BM)", f"num_n = tl.cdiv({N}, BN)",
            "group = GROUP_M * num_n", "first_m = (pid // group) * GROUP_M",
            "gsz = tl.minimum(num_m - first_m, GROUP_M)",
            "pm = first_m + (pid % group) % gsz", "pn = (pid % group) // gsz",
            "mo = pm * BM + tl.arange(0, BM)", "no = pn * BN + tl.arange(0, BN)",
            f"mmask = (mo < {M})[:, None]", f"nmask = (no < {N})[None, :]"]
    env: dict[str, str] = {}
    py_decode(b_vars_, "bid", head, env)
    m_env, n_env = dict(env), dict(env)
    ma, nb = [], []
    py_decode(m_vars, "mo[:, None]", ma, m_env)
    py_decode(n_vars, "no[None, :]", nb, n_env)
    head += ma + nb
    prec = sched.get("input_precision", "ieee")
    in_ty = a_e.dtype if a_e.dtype in ("f16", "bf16") and b_e.dtype == a_e.dtype else "f32"
    # a GEMV is memory-bound: accumulating fp32 in fp64 costs nothing there and keeps the long sums
    # of a reassociated reduction (sum through linear) as exact as the reference's
    wide = in_ty == "f32" and min(M, N) == 1
    loop = [f"acc = tl.zeros([BM, BN], {'tl.float64' if wide else 'tl.float32'})", f"for k0 in range(0, {K}, BK):"]
    a_env = dict(m_env, **{kname: "ka"})
    b_env = dict(n_env, **{kname: "kb"})
    mv, nv = frozenset(n for n, _ in m_vars), frozenset(n for n, _ in n_vars)
    kv = frozenset([kname])
    # TMA descriptors for plain operands where the schedule asks (Hopper); pointer loads otherwise
    tma_ops = tma.loads(k) if tma.wanted(sched) and not wide else {}
    loop = [setup for setup, _ in tma_ops.values()] + loop
    pa = Printer(_Ctx(a_env, [(mv, "mmask"), (kv, "kamask")]).render, prefix="a")
    a_code = tma_ops[id(a_e)][1] if id(a_e) in tma_ops else pa(a_e)
    pb = Printer(_Ctx(b_env, [(kv, "kbmask"), (nv, "nmask")]).render, prefix="b")
    b_code = tma_ops[id(b_e)][1] if id(b_e) in tma_ops else pb(b_e)
    if wide:
        in_ty = "f64"
    inner = ["ka = k0 + tl.arange(0, BK)[None, :]", "kb = k0 + tl.arange(0, BK)[:, None]",
             f"kamask = ka < {K}", f"kbmask = kb < {K}"] + pa.lines + pb.lines
    # an operand may not depend on every tile axis (a GEMV's vector): broadcast it to the tile
    a_tile = f"tl.broadcast_to(({a_code}).to({TL[in_ty]}), (BM, BK))"
    b_tile = f"tl.broadcast_to(({b_code}).to({TL[in_ty]}), (BK, BN))"
    inner.append(f"acc += tl.dot({a_tile}, {b_tile}, input_precision=\"{prec}\")" if in_ty == "f32" else
                 f"acc += tl.dot({a_tile}, {b_tile})")
    loop += ["    " + ln for ln in inner]
    ep_env = dict(m_env)
    ep_env.update(n_env)
    ctx = _Ctx(ep_env, [(mv, "mmask"), (nv, "nmask")], accs={id(dot): "acc"})
    p = Printer(ctx.render, prefix="e")
    val = p(k.expr)
    strides = k.out.strides()
    flat = " + ".join(f"{ep_env[v.name]} * {s}" if s != 1 else ep_env[v.name]
                      for v, s in zip(k.coords, strides)) or "0"
    tail = p.lines + [f"tl.store(out_ptr + ({flat}) + (mo[:, None] * 0 + no[None, :] * 0), "
                      f"{_store_value(val, k.out.dtype, '[BM, BN]')}, mask=mmask & nmask)"]
    sig = _signature(k, ["BM: tl.constexpr", "BN: tl.constexpr", "BK: tl.constexpr", "GROUP_M: tl.constexpr"])
    k.schedule.setdefault("_grid", (M, N, B))
    return sig + "\n" + "\n".join("    " + ln for ln in head + loop + tail) + "\n"


def gemm_dims(k: Kernel) -> tuple[int, int, int, int]:
    """(M, N, K, batch) of a matmul kernel, as its template tiles it."""
    _matmul(k, {})
    M, N, B = k.schedule["_grid"]
    (dot,) = k.reductions()
    return M, N, dot.axes[0].extent, B
