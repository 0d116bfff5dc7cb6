"""lax primitive -> graph IR converters (one table, PRIMS) and the jaxpr walk that applies them; the
problem convention and the lift's entry point are in ir/jax_lift.py. Each converter gets the conversion
state, the equation, its operands as nodes and its params, and returns the output node(s)."""

from __future__ import annotations

import linecache
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from .convert import LiftCtx
from .errors import AkgError
from .graph import Graph, Node
from .port import pallas

JAX_DTYPES = {"float16": "f16", "bfloat16": "bf16", "float32": "f32", "float64": "f64", "int8": "i8",
              "int16": "i16", "int32": "i32", "int64": "i64", "uint8": "u8", "bool": "bool"}


def ir_dtype(dt: Any) -> str:
    name = np.dtype(dt).name if not hasattr(dt, "name") else dt.name
    if name not in JAX_DTYPES:
        raise AkgError(f"dtype {name} is not supported by the akg IR")
    return JAX_DTYPES[name]


def to_torch(x: Any) -> torch.Tensor:
    """A JAX (or NumPy) array as a torch tensor (bf16 through float32: NumPy has no bfloat16)."""
    a = np.asarray(x)
    if a.dtype.name == "bfloat16":
        return torch.from_numpy(a.astype(np.float32)).to(torch.bfloat16)
    return torch.from_numpy(np.array(a, copy=True))


class Cx:
    """Conversion state: jaxpr variables -> graph nodes, the graph, the equation being converted."""

    def __init__(self, graph: Graph, path: Path) -> None:
        self.g, self.path = graph, path
        self.env: dict[Any, Node] = {}
        self.consts = 0  # array constants made weights so far (const_0, const_1, ...)
        self.eqns: list[Any] = []  # the equation being converted, inside those that call its jaxpr

    def where(self, eqn: Any = None) -> str:
        """The user's line behind an equation; one inside a jit of a library function (jnp.sort's) has
        none of its own, so the enclosing call's line is taken."""
        for e in ([eqn] if eqn is not None else []) + self.eqns[::-1]:
            loc = _where(e)
            if loc:
                return loc
        return self.path.name

    def add(self, op: str, args: list[Node | None], **attrs: Any) -> Node:
        node = self.g.add(op, args, attrs)
        if self.eqns:
            node.meta["source"] = self.where()
        return node

    def const(self, value: Any) -> Node:
        a = np.asarray(value)
        if a.ndim == 0:
            v = a.item()
            dt = ir_dtype(a.dtype)
            return self.add("scalar", [], value=float(v) if dt in ("f16", "bf16", "f32", "f64") else v, dtype=dt)
        self.consts += 1
        return self.g.param(f"const_{self.consts - 1}", to_torch(a))

    def read(self, v: Any) -> Node:
        from jax.extend.core import Literal

        if isinstance(v, Literal):
            return self.const(v.val)
        return self.env[v]


def _where(eqn: Any) -> str:
    """`file:line: `code`` of the user's code that made this equation ("" where none is known)."""
    try:
        from jax._src import source_info_util

        frame = source_info_util.user_frame(eqn.source_info.traceback)
        if frame is not None:
            text = linecache.getline(frame.file_name, frame.start_line).strip()
            return f"{Path(frame.file_name).name}:{frame.start_line}" + (f": `{text}`" if text else "")
    except Exception:  # noqa: BLE001 - source info is a courtesy; the primitive's name is enough
        pass
    return ""


def convert_jaxpr(cx: Cx, jaxpr: Any, args: list[Node], consts: list[Any] = ()) -> list[Node]:
    """Convert one jaxpr's equations with `args` bound to its inputs; returns its outputs' nodes."""
    for v, a in zip(jaxpr.invars, args):
        cx.env[v] = a
    for v, c in zip(jaxpr.constvars, consts):
        cx.env[v] = cx.const(c)
    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        conv = PRIMS.get(name)
        if conv is None:
            raise AkgError(f"unsupported JAX primitive `{name}` at {cx.where(eqn)}; akg converts "
                           f"{len(PRIMS)} lax primitives (ir/jax_prims.py): rewrite it with those, or add a converter")
        cx.eqns.append(eqn)
        try:
            res = conv(cx, eqn, [cx.read(v) for v in eqn.invars], dict(eqn.params))
        finally:
            cx.eqns.pop()
        res = res if isinstance(res, (list, tuple)) else [res]
        for v, node in zip(eqn.outvars, res):
            want = tuple(v.aval.shape)
            if tuple(node.shape) != want:  # jaxpr's own broadcasting rules differ from ours: say so, never guess
                raise AkgError(f"JAX primitive `{name}` at {cx.where(eqn)} converted to shape "
                               f"{list(node.shape)}, jaxpr says {list(want)}")
            cx.env[v] = node
    return [cx.read(v) for v in jaxpr.outvars]


Conv = Callable[[Cx, Any, list[Node], dict[str, Any]], Any]
PRIMS: dict[str, Conv] = {}


def prim(*names: str) -> Callable[[Conv], Conv]:
    def deco(fn: Conv) -> Conv:
        for n in names:
            PRIMS[n] = fn
        return fn
    return deco


def _same(op: str) -> Conv:
    return lambda cx, eqn, a, p: cx.add(op, a)


for _jax, _ir in {"add": "add", "sub": "sub", "mul": "mul", "div": "div", "max": "maximum", "min": "minimum",
                  "pow": "pow", "atan2": "atan2", "rem": "remainder", "gt": "gt", "lt": "lt", "ge": "ge",
                  "le": "le", "eq": "eq", "ne": "ne", "and": "logical_and", "or": "logical_or",
                  "neg": "neg", "exp": "exp", "log": "log", "tanh": "tanh", "logistic": "sigmoid",
                  "sqrt": "sqrt", "rsqrt": "rsqrt", "abs": "abs", "erf": "erf", "sin": "sin", "cos": "cos",
                  "log1p": "log1p", "expm1": "expm1", "sign": "sign", "floor": "floor", "ceil": "ceil",
                  "not": "logical_not"}.items():
    PRIMS[_jax] = _same(_ir)


@prim("add_any")
def _add_any(cx: Cx, eqn: Any, a: list[Node], p: dict[str, Any]) -> Node:
    return cx.add("add", a)


@prim("stop_gradient", "copy", "copy_p", "optimization_barrier", "reduce_precision")
def _identity(cx: Cx, eqn: Any, a: list[Node], p: dict[str, Any]) -> Any:
    return a


@prim("is_finite")
def _is_finite(cx: Cx, eqn: Any, a: list[Node], p: dict[str, Any]) -> Node:
    # x - x is 0 exactly where x is finite (NaN for an infinity or a NaN)
    return cx.add("eq", [cx.add("sub", [a[0], a[0]]), cx.const(_np_scalar(0.0, a[0].dtype))])


@prim("square")
def _square(cx: Cx, eqn: Any, a: list[Node], p: dict[str, Any]) -> Node:
    return cx.add("mul", [a[0], a[0]])


@prim("integer_pow")
def _integer_pow(cx: Cx, eqn: Any, a: list[Node], p: dict[str, Any]) -> Node:
    y = int(p["y"])
    if y == 2:
        return cx.add("mul", [a[0], a[0]])
    return cx.add("pow", [a[0], cx.const(_np_scalar(float(y), a[0].dtype))])


def _np_scalar(v: float, dtype: str) -> Any:
    return np.asarray(v, dtype={"f16": np.float16, "f64": np.float64}.get(dtype, np.float32))


@prim("exp2")
def _exp2(cx: Cx, eqn: Any, a: list[Node], p: dict[str, Any]) -> Node:
    return cx.add("exp", [cx.add("mul", [a[0], cx.const(_np_scalar(math.log(2.0), a[0].dtype))])])


@prim("select_n")
def _select_n(cx: Cx, eqn: Any, a: list[Node], p: dict[str, Any]) -> Node:
    if len(a) != 3:
        raise AkgError(f"select_n with {len(a) - 1} cases at {cx.where()}: akg converts two (a where)")
    pred, false_case, true_case = a
    if pred.dtype != "bool":  # an integer case index: 0 picks the first case
        pred = cx.add("ne", [pred, cx.const(np.asarray(0, dtype=np.int32))])
    return cx.add("where", [pred, true_case, false_case])


@prim("clamp")
def _clamp(cx: Cx, eqn: Any, a: list[Node], p: dict[str, Any]) -> Node:
    lo, x, hi = a
    return cx.add("minimum", [cx.add("maximum", [x, lo]), hi])


@prim("convert_element_type")
def _convert(cx: Cx, eqn: Any, a: list[Node], p: dict[str, Any]) -> Node:
    dt = ir_dtype(p["new_dtype"])
    return a[0] if dt == a[0].dtype else cx.add("cast", [a[0]], dtype=dt)


@prim("reshape")
def _reshape(cx: Cx, eqn: Any, a: list[Node], p: dict[str, Any]) -> Node:
    if p.get("dimensions"):
        raise AkgError(f"reshape with a transposition at {cx.where()} is not converted")
    return cx.add("reshape", [a[0]], shape=list(p["new_sizes"]))


@prim("squeeze")
def _squeeze(cx: Cx, eqn: Any, a: list[Node], p: dict[str, Any]) -> Node:
    return cx.add("reshape", [a[0]], shape=list(eqn.outvars[0].aval.shape))


@prim("expand_dims")
def _expand_dims(cx: Cx, eqn: Any, a: list[Node], p: dict[str, Any]) -> Node:
    return cx.add("reshape", [a[0]], shape=list(eqn.outvars[0].aval.shape))


@prim("transpose")
def _transpose(cx: Cx, eqn: Any, a: list[Node], p: dict[str, Any]) -> Node:
    return cx.add("permute", [a[0]], dims=list(p["permutation"]))


@prim("broadcast_in_dim")
def _broadcast(cx: Cx, eqn: Any, a: list[Node], p: dict[str, Any]) -> Node:
    x, shape, dims = a[0], tuple(p["shape"]), tuple(p["broadcast_dimensions"])
    lifted = [1] * len(shape)
    for src, d in enumerate(dims):
        lifted[d] = x.shape[src]
    if tuple(lifted) != tuple(x.shape):
        x = cx.add("reshape", [x], shape=lifted)
    return x if tuple(x.shape) == shape else cx.add("expand", [x], shape=list(shape))


@prim("concatenate")
def _concat(cx: Cx, eqn: Any, a: list[Node], p: dict[str, Any]) -> Node:
    return cx.add("concat", a, dim=int(p["dimension"]))


@prim("slice")
def _slice(cx: Cx, eqn: Any, a: list[Node], p: dict[str, Any]) -> Node:
    x = a[0]
    strides = p.get("strides") or [1] * len(p["start_indices"])
    for d, (s, e, st) in enumerate(zip(p["start_indices"], p["limit_indices"], strides)):
        if (s, e, st) != (0, x.shape[d], 1):
            x = cx.add("slice", [x], dim=d, start=int(s), end=int(e), step=int(st))
    return x


@prim("rev")
def _rev(cx: Cx, eqn: Any, a: list[Node], p: dict[str, Any]) -> Node:
    return cx.add("flip", [a[0]], dims=list(p["dimensions"]))


@prim("pad")
def _pad(cx: Cx, eqn: Any, a: list[Node], p: dict[str, Any]) -> Node:
    x, value = a
    cfg = p["padding_config"]
    while value.op == "cast" and value.args[0] is not None:  # jnp.pad's 0 arrives as an int, cast
        value = value.args[0]
    if any(interior for _, _, interior in cfg) or value.op != "scalar":
        raise AkgError(f"pad with interior padding or a traced value at {cx.where()} is not converted")
    pads: list[int] = []
    for lo, hi, _ in reversed(cfg):  # torch's F.pad order: last dimension first
        pads += [int(lo), int(hi)]
    return cx.add("pad", [x], pads=pads, value=float(value.attrs["value"]))


def _reduce(op: str) -> Conv:
    return lambda cx, eqn, a, p: cx.add(op, a, dims=[int(d) for d in p["axes"]], keepdim=False)


PRIMS["reduce_sum"] = _reduce("sum")
PRIMS["reduce_max"] = _reduce("amax")
PRIMS["reduce_min"] = _reduce("amin")
PRIMS["reduce_prod"] = _reduce("prod")


@prim("argmax", "argmin")
def _argmax(cx: Cx, eqn: Any, a: list[Node], p: dict[str, Any]) -> Node:
    [axis] = p["axes"]
    out = cx.add(eqn.primitive.name, a, dim=int(axis), keepdim=False)
    dt = ir_dtype(p["index_dtype"])
    return out if out.dtype == dt else cx.add("cast", [out], dtype=dt)


@prim("cumsum", "cumprod")
def _cum(cx: Cx, eqn: Any, a: list[Node], p: dict[str, Any]) -> Node:
    return cx.add(eqn.primitive.name, a, dim=int(p["axis"]), reverse=bool(p.get("reverse", False)))


@prim("dot_general")
def _dot_general(cx: Cx, eqn: Any, a: list[Node], p: dict[str, Any]) -> Node:
    """(batch..., lhs free..., rhs free...) = contraction over the named dimensions, as one batched matmul
    between operands permuted to (batch, free, contract) and (batch, contract, free)."""
    lhs, rhs = a
    (lc, rc), (lb, rb) = p["dimension_numbers"]
    lf = [d for d in range(len(lhs.shape)) if d not in lc and d not in lb]
    rf = [d for d in range(len(rhs.shape)) if d not in rc and d not in rb]
    size = lambda x, ds: math.prod(x.shape[d] for d in ds)  # noqa: E731
    B, M, K, N = size(lhs, lb), size(lhs, lf), size(lhs, lc), size(rhs, rf)

    def arrange(x: Node, order: list[int], shape: list[int]) -> Node:
        if order != list(range(len(x.shape))):
            x = cx.add("permute", [x], dims=order)
        return x if list(x.shape) == shape else cx.add("reshape", [x], shape=shape)

    left = arrange(lhs, [*lb, *lf, *lc], [B, M, K] if lb else [M, K])
    right = arrange(rhs, [*rb, *rc, *rf], [B, K, N] if rb else [K, N])
    out = cx.add("matmul", [left, right])
    want = [*(lhs.shape[d] for d in lb), *(lhs.shape[d] for d in lf), *(rhs.shape[d] for d in rf)]
    if list(out.shape) != want:
        out = cx.add("reshape", [out], shape=want)
    pref = p.get("preferred_element_type")
    if pref is not None and ir_dtype(pref) != out.dtype:
        out = cx.add("cast", [out], dtype=ir_dtype(pref))
    return out


@prim("conv_general_dilated")
def _conv(cx: Cx, eqn: Any, a: list[Node], p: dict[str, Any]) -> Node:
    """NCHW inputs and OIHW kernels (lax's default numbering), symmetric padding, no input dilation."""
    x, w = a
    dn = p["dimension_numbers"]
    nd = len(x.shape) - 2
    plain = tuple(range(nd + 2))
    specs = (dn.lhs_spec, dn.rhs_spec, dn.out_spec) if dn is not None else (plain, plain, plain)
    if any(tuple(s) != plain for s in specs):
        raise AkgError(f"conv_general_dilated with dimension numbers {specs} at {cx.where()}: akg converts "
                       f"NCHW/OIHW (pass dimension_numbers=('NCHW', 'OIHW', 'NCHW') or transpose around it)")
    if any(d != 1 for d in p["lhs_dilation"]) or p.get("batch_group_count", 1) != 1:
        raise AkgError(f"conv_general_dilated with input dilation or batch groups at {cx.where()} "
                       "is not converted")
    pads = [tuple(pr) for pr in p["padding"]]
    if any(lo != hi for lo, hi in pads):
        lo_hi: list[int] = []
        for lo, hi in reversed(pads):
            lo_hi += [int(lo), int(hi)]
        x = cx.add("pad", [x], pads=lo_hi, value=0.0)
        pads = [(0, 0)] * nd
    return cx.add("conv", [x, w], stride=[int(s) for s in p["window_strides"]],
                  padding=[int(lo) for lo, _ in pads], dilation=[int(d) for d in p["rhs_dilation"]],
                  groups=int(p["feature_group_count"]))


@prim("pallas_call")
def _pallas_call(cx: Cx, eqn: Any, a: list[Node], p: dict[str, Any]) -> list[Node]:
    """A Pallas kernel: vectorised over its grid and converted (`ir.port.pallas`)."""
    return pallas.lift_call(LiftCtx(cx.g), eqn, a, p, cx.where(eqn),
                            lambda jaxpr, args, consts: convert_jaxpr(cx, jaxpr, args, consts))


@prim("pjit", "jit", "closed_call", "core_call", "remat", "checkpoint", "custom_jvp_call", "custom_vjp_call",
      "custom_vjp_call_jaxpr")
def _call(cx: Cx, eqn: Any, a: list[Node], p: dict[str, Any]) -> list[Node]:
    """A nested jaxpr (jit, custom derivatives, checkpoints): converted inline; derivatives do not matter
    for the forward program."""
    inner = p.get("jaxpr") or p.get("call_jaxpr") or p.get("fun_jaxpr")
    if inner is None:
        raise AkgError(f"`{eqn.primitive.name}` at {cx.where()} carries no jaxpr to convert")
    closed = getattr(inner, "jaxpr", None)
    consts = list(getattr(inner, "consts", []))
    return convert_jaxpr(cx, closed if closed is not None else inner, a, consts)
