"""The example backend of docs/adding-a-backend.md: NumPy. A kernel is a Python function that evaluates
its expression over the whole coordinate grid at once, one array axis per output coordinate and per
reduction variable, broadcasting the rest; a reduction reduces its axes (keeping them, size 1)."""

from __future__ import annotations

from pathlib import Path

from dsl_backends.base import BackendBase, Frame, Manifest, Ref, Template, UnsupportedKernel
from dsl_backends.exprs import FLOATS, Printer, comp, py_const
from hardware_models.spec import HardwareModel
from ir.kernel.ir import Const, Expr, IOp, Kernel, KernelProgram, Load, Op, Reduce, Var, walk
from ir.kernel.schedule import Schedule, Schedules

MANIFEST = Manifest.load(Path(__file__).with_name("manifest.toml"))
NP = {"f16": "np.float16", "bf16": "np.float32", "f32": "np.float32", "f64": "np.float64", "i8": "np.int8",
      "i16": "np.int16", "i32": "np.int32", "i64": "np.int64", "u8": "np.uint8", "bool": "np.bool_"}
# the primitives of ir.kernel.expand, plus the composites NumPy has (its overrides)
OPS = {"add": "({0} + {1})", "sub": "({0} - {1})", "mul": "({0} * {1})", "neg": "(-{0})", "abs": "np.abs({0})",
       "exp": "np.exp({0})", "log": "np.log({0})", "sqrt": "np.sqrt({0})", "sin": "np.sin({0})",
       "cos": "np.cos({0})", "tanh": "np.tanh({0})", "erf": "_erf({0})", "floor": "np.floor({0})",
       "ceil": "np.ceil({0})", "round": "np.rint({0})", "maximum": "np.maximum({0}, {1})",
       "minimum": "np.minimum({0}, {1})", "pow": "np.power({0}, {1})", "atan2": "np.arctan2({0}, {1})",
       "eq": "({0} == {1})", "ne": "({0} != {1})", "lt": "({0} < {1})", "le": "({0} <= {1})", "gt": "({0} > {1})",
       "ge": "({0} >= {1})", "logical_and": "np.logical_and({0}, {1})", "logical_or": "np.logical_or({0}, {1})",
       "logical_not": "np.logical_not({0})", "where": "np.where({0}, {1}, {2})",
       "log1p": "np.log1p({0})", "expm1": "np.expm1({0})", "trunc": "np.trunc({0})"}
IOPS = {"+": "({0} + {1})", "-": "({0} - {1})", "*": "({0} * {1})", "//": "np.floor_divide({0}, {1})",
        "%": "np.remainder({0}, {1})", "min": "np.minimum({0}, {1})", "max": "np.maximum({0}, {1})",
        "<": "({0} < {1})", "<=": "({0} <= {1})", "==": "({0} == {1})", "!=": "({0} != {1})", ">=": "({0} >= {1})",
        ">": "({0} > {1})", "and": "np.logical_and({0}, {1})", "or": "np.logical_or({0}, {1})"}
PRELUDE = '''
_erf = np.vectorize(math.erf, otypes=[np.float64])


def _bf16(x):  # fp32 rounded to the nearest bf16 (even on ties), kept in fp32
    x = np.asarray(x, np.float32)
    u = x.view(np.uint32)
    r = ((u + np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))) & np.uint32(0xFFFF0000)).view(np.float32)
    return np.where(np.isnan(x), x, r)


def _red(op, body, axes, extents):
    """`op` over `axes` (kept, size 1) of `body` broadcast to `extents` there; floats summed in float64."""
    body = np.asarray(body)
    shape = [extents[axes.index(d)] if d in axes else body.shape[d] for d in range(body.ndim)]
    body = np.broadcast_to(body, shape)
    if op in ("sum", "dot", "prod"):
        f = np.sum if op != "prod" else np.prod
        wide = np.float64 if body.dtype.kind == "f" else None
        return f(body, axis=axes, keepdims=True, dtype=wide).astype(body.dtype)
    if op in ("max", "min"):
        return (np.max if op == "max" else np.min)(body, axis=axes, keepdims=True)
    keep = [d for d in range(body.ndim) if d not in axes]
    moved = np.transpose(body, keep + list(axes)).reshape([body.shape[d] for d in keep] + [-1])
    idx = (np.argmax if op == "argmax" else np.argmin)(moved, axis=-1)
    out = idx.reshape([body.shape[d] for d in keep] + [1] * len(axes))
    return np.transpose(out, np.argsort(keep + list(axes))).astype(np.int64)


def _out(r, rank, ncoords, shape):
    r = np.asarray(r)
    r = r.reshape(r.shape + (1,) * (rank - r.ndim)) if r.ndim else r.reshape((1,) * rank)
    return np.broadcast_to(r.reshape(r.shape[:ncoords]), shape)


def _akg_run(kernel, args, out):
    """The kernel on NumPy views of the inputs (half types widened to float32); the result copied into
    `out` (converted to its type)."""
    arrays = [(a.float() if a.dtype in (torch.float16, torch.bfloat16) else a).numpy().reshape(-1) for a in args]
    out.copy_(torch.from_numpy(np.array(kernel(*arrays))))  # a contiguous copy (0-d stays 0-d)
    return out
'''


class _Grid:
    """Renders expressions over the kernel's grid: each variable is an arange along its own axis."""

    def __init__(self, k: Kernel) -> None:
        order = list(k.coords)
        for e in walk(k.expr):
            if isinstance(e, Reduce):
                order += [v for v in e.axes if v not in order]
        self.axis = {v.name: i for i, v in enumerate(order)}
        self.vars = order

    def var_line(self, v: Var) -> str:
        shape = [1] * len(self.vars)
        shape[self.axis[v.name]] = v.extent
        return f"{v.name} = np.arange({v.extent}).reshape({tuple(shape)})"

    def render(self, e: Expr, p: Printer) -> str:
        if isinstance(e, Var):
            return e.name
        if isinstance(e, Const):
            return py_const(e.value, e.dtype) if e.dtype != "bool" else repr(bool(e.value))
        if isinstance(e, IOp):
            return IOPS[e.op].format(p(e.a), p(e.b))
        if isinstance(e, Load):
            flat = " + ".join(f"{p(i)} * {s}" if s != 1 else p(i) for i, s in zip(e.index, e.buf.strides())) or "0"
            if e.mask is None:
                return f"{e.buf.name}[{flat}]"
            m = p(e.mask)
            return f"np.where({m}, {e.buf.name}[np.where({m}, {flat}, 0)], {py_const(e.other, e.buf.dtype)})"
        if isinstance(e, Op):
            return self.op(e, [p(a) for a in e.args])
        if isinstance(e, Reduce):
            axes = tuple(self.axis[v.name] for v in e.axes)
            return f"_red({e.op!r}, {p(e.body)}, {axes}, {tuple(v.extent for v in e.axes)})"
        raise UnsupportedKernel(f"NumPy has no rule for {type(e).__name__}")

    def op(self, e: Op, a: list[str]) -> str:
        t = comp(e.dtype)
        if t in FLOATS and e.op not in ("where", "cast"):  # operands in the op's compute type
            a = [x if isinstance(arg, Const) or comp(arg.dtype) == t else f"np.asarray({x}).astype({NP[t]})"
                 for x, arg in zip(a, e.args)]
        if e.op in OPS:
            return OPS[e.op].format(*a)
        if e.op == "div" and t in FLOATS:
            return f"({a[0]} / {a[1]})"
        if e.op == "remainder":
            return f"({a[0]} - np.floor({a[0]} / {a[1]}) * {a[1]})" if t in FLOATS else f"np.remainder({a[0]}, {a[1]})"
        if e.op == "cast":
            to = dict(e.attrs)["dtype"]
            if to == "bf16":
                return f"_bf16({a[0]})"
            if to == "bool":
                return f"(np.asarray({a[0]}) != 0)"
            return f"np.asarray({a[0]}).astype({NP[to]})" + (".astype(np.float32)" if to == "f16" else "")
        raise UnsupportedKernel(f"NumPy has no rule for op {e.op!r}")


def render(k: Kernel, schedule: Schedule, target: HardwareModel) -> str:
    g = _Grid(k)
    p = Printer(g.render)
    val = p(k.expr)
    args = ", ".join(b.name for b in k.inputs())
    body = [g.var_line(v) for v in g.vars] + p.lines
    body.append(f"return _out({val}, {len(g.vars)}, {len(k.coords)}, {tuple(k.out.shape)})")
    return f"def {k.name}({args}):\n" + "\n".join("    " + ln for ln in body) + "\n"


def launch(k: Kernel, schedule: Schedule, ref: Ref) -> list[str]:
    return [f"_akg_run({k.name}, [{', '.join(ref(b) for b in k.inputs())}], {k.out.name})"]


TEMPLATE = Template(render, launch)  # no schedule: NumPy tiles nothing


class NumpyBackend(BackendBase):
    manifest = MANIFEST
    overrides = frozenset({"log1p", "expm1", "trunc"})
    templates = {"pointwise": TEMPLATE, "reduce": TEMPLATE, "matmul": TEMPLATE}

    def frame(self, prog: KernelProgram, schedules: Schedules, target: HardwareModel,
              sources: dict[str, str]) -> Frame:
        return Frame(["import math", "", "import numpy as np"], PRELUDE, sources)


BACKEND = NumpyBackend()
