"""The reference interpreter: the one definition of what each IR op means.

Primitives are defined here on torch tensors; composites are defined by their decomposition
(`ir.decompose`) evaluated through the same primitives. Everything else in akg (rewrites,
kernels, backends) is checked against this module.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F

from .ops import opdef
from .types import DTYPES

Tensor = torch.Tensor


@dataclass
class EvalCtx:
    device: torch.device | str = "cpu"
    generator: torch.Generator | None = None  # for dropout in training mode
    extra: dict[str, Any] = field(default_factory=dict)


Impl = Callable[[Sequence[Tensor | None], dict[str, Any], EvalCtx], Tensor]
IMPLS: dict[str, Impl] = {}
# composite ops, by their decomposition into the ops above (registered by ir.decompose)
COMPOSITES: dict[str, Impl] = {}


def impl(*names: str) -> Callable[[Impl], Impl]:
    def reg(fn: Impl) -> Impl:
        for n in names:
            IMPLS[n] = fn
        return fn
    return reg


def _dims(d: Any) -> list[int] | None:
    return None if d is None else list(d)


# --- sources
@impl("scalar")
def _scalar(a, at, ctx):
    return torch.tensor(at["value"], dtype=DTYPES[at["dtype"]], device=ctx.device)


@impl("full")
def _full(a, at, ctx):
    return torch.full(tuple(at["shape"]), at["value"], dtype=DTYPES[at["dtype"]], device=ctx.device)


@impl("arange")
def _arange(a, at, ctx):
    return torch.arange(at["start"], at["end"], at["step"], dtype=DTYPES[at["dtype"]], device=ctx.device)


# --- unary
_UNARY: dict[str, Callable[[Tensor], Tensor]] = {
    "neg": torch.neg, "abs": torch.abs, "exp": torch.exp, "log": torch.log, "log1p": torch.log1p,
    "expm1": torch.expm1, "sqrt": torch.sqrt, "rsqrt": torch.rsqrt, "reciprocal": torch.reciprocal,
    "sin": torch.sin, "cos": torch.cos, "tanh": torch.tanh, "sigmoid": torch.sigmoid,
    "erf": torch.erf, "sign": torch.sign, "floor": torch.floor, "ceil": torch.ceil,
    "round": torch.round, "trunc": torch.trunc, "relu": torch.relu, "silu": F.silu, "mish": F.mish,
    "selu": F.selu, "hardsigmoid": F.hardsigmoid, "hardswish": F.hardswish,
    "logical_not": torch.logical_not, "isnan": torch.isnan,
}
for _n, _f in _UNARY.items():
    IMPLS[_n] = (lambda f: lambda a, at, ctx: f(a[0]))(_f)

impl("gelu")(lambda a, at, ctx: F.gelu(a[0], approximate=at["approximate"]))
impl("softplus")(lambda a, at, ctx: F.softplus(a[0], at["beta"], at["threshold"]))
impl("elu")(lambda a, at, ctx: torch.ops.aten.elu(a[0], at["alpha"], at["scale"], at["input_scale"]))
impl("leaky_relu")(lambda a, at, ctx: F.leaky_relu(a[0], at["negative_slope"]))
impl("hardtanh")(lambda a, at, ctx: F.hardtanh(a[0], at["min_val"], at["max_val"]))
impl("clamp")(lambda a, at, ctx: torch.clamp(a[0], at["min"], at["max"]))
impl("cast")(lambda a, at, ctx: a[0].to(DTYPES[at["dtype"]]))

# --- binary and ternary
_BINARY: dict[str, Callable[[Tensor, Tensor], Tensor]] = {
    "add": torch.add, "sub": torch.sub, "mul": torch.mul, "pow": torch.pow,
    "maximum": torch.maximum, "minimum": torch.minimum, "eq": torch.eq, "ne": torch.ne,
    "lt": torch.lt, "le": torch.le, "gt": torch.gt, "ge": torch.ge,
    "logical_and": torch.logical_and, "logical_or": torch.logical_or,
    "remainder": torch.remainder, "atan2": torch.atan2,
}


for _n, _f in _BINARY.items():
    IMPLS[_n] = (lambda f: lambda a, at, ctx: f(a[0], a[1]))(_f)
impl("div")(lambda a, at, ctx: torch.div(a[0], a[1], rounding_mode=at["rounding_mode"]))
impl("where")(lambda a, at, ctx: torch.where(a[0].bool() if a[0].dtype != torch.bool else a[0], a[1], a[2]))


# --- reductions
def _reduce(fn: Callable[..., Tensor]) -> Impl:
    def run(a, at, ctx):
        dims = _dims(at["dims"])
        x = a[0]
        if dims is None:
            dims = list(range(x.dim()))
        if not dims:
            return x.clone()
        return fn(x, dims, at["keepdim"])
    return run


IMPLS["sum"] = _reduce(lambda x, d, k: torch.sum(x, d, keepdim=k))
IMPLS["mean"] = _reduce(lambda x, d, k: torch.mean(x, d, keepdim=k))
IMPLS["amax"] = _reduce(lambda x, d, k: torch.amax(x, d, keepdim=k))
IMPLS["amin"] = _reduce(lambda x, d, k: torch.amin(x, d, keepdim=k))


@impl("prod")
def _prod(a, at, ctx):
    x = a[0]
    dims = _dims(at["dims"])
    dims = list(range(x.dim())) if dims is None else [d % max(x.dim(), 1) for d in dims]
    for d in sorted(dims, reverse=True):
        x = torch.prod(x, d, keepdim=True)
    return x if at["keepdim"] else x.reshape([s for i, s in enumerate(x.shape) if i not in dims])


@impl("var")
def _var(a, at, ctx):
    return torch.var(a[0], _dims(at["dims"]), correction=at["correction"], keepdim=at["keepdim"])


@impl("std")
def _std(a, at, ctx):
    return torch.std(a[0], _dims(at["dims"]), correction=at["correction"], keepdim=at["keepdim"])


@impl("norm")
def _norm(a, at, ctx):
    return torch.linalg.vector_norm(a[0], at["ord"], _dims(at["dims"]), at["keepdim"])


impl("argmax")(lambda a, at, ctx: torch.argmax(a[0], at["dim"], at["keepdim"]))
impl("argmin")(lambda a, at, ctx: torch.argmin(a[0], at["dim"], at["keepdim"]))

# --- contractions
impl("matmul")(lambda a, at, ctx: torch.matmul(a[0], a[1]))
impl("linear")(lambda a, at, ctx: F.linear(a[0], a[1], a[2] if len(a) > 2 else None))


def _channels(at, x, conv):
    """A convolution over channels-first x; channels_last: x and the result hold channels on the last axis."""
    if not at["channels_last"]:
        return conv(x)
    return conv(x.movedim(-1, 1)).movedim(1, -1).contiguous()


@impl("conv")
def _conv(a, at, ctx):
    fn = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}[a[1].dim() - 2]
    return _channels(at, a[0], lambda x: fn(x, a[1], a[2] if len(a) > 2 else None, at["stride"], at["padding"],
                                            at["dilation"], at["groups"]))


@impl("conv_transpose")
def _conv_t(a, at, ctx):
    fn = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}[a[1].dim() - 2]
    return _channels(at, a[0], lambda x: fn(x, a[1], a[2] if len(a) > 2 else None, at["stride"], at["padding"],
                                            at["output_padding"], at["groups"], at["dilation"]))


# --- windows
@impl("max_pool")
def _max_pool(a, at, ctx):
    fn = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}[len(at["kernel"])]
    return fn(a[0], at["kernel"], at["stride"], at["padding"], at["dilation"], ceil_mode=at["ceil_mode"])


@impl("conv_weight_grad")
def _conv_weight_grad(a, at, ctx):
    return torch.ops.aten.convolution_backward(a[0], a[1], a[2], None, at["stride"], at["padding"], at["dilation"],
                                               False, [0] * len(at["stride"]), at["groups"], [False, True, False])[1]


@impl("max_pool_indices")
def _max_pool_indices(a, at, ctx):
    fn = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}[len(at["kernel"])]
    return fn(a[0], at["kernel"], at["stride"], at["padding"], at["dilation"], ceil_mode=at["ceil_mode"],
              return_indices=True)[1]


@impl("avg_pool")
def _avg_pool(a, at, ctx):
    k = len(at["kernel"])
    if k == 1:
        if at["divisor_override"] is not None:
            raise ValueError("avg_pool 1-d has no divisor_override")
        return F.avg_pool1d(a[0], at["kernel"], at["stride"], at["padding"], at["ceil_mode"],
                            at["count_include_pad"])
    fn = {2: F.avg_pool2d, 3: F.avg_pool3d}[k]
    return fn(a[0], at["kernel"], at["stride"], at["padding"], at["ceil_mode"], at["count_include_pad"],
              at["divisor_override"])


@impl("adaptive_avg_pool")
def _adaptive_avg(a, at, ctx):
    fn = {1: F.adaptive_avg_pool1d, 2: F.adaptive_avg_pool2d, 3: F.adaptive_avg_pool3d}
    return fn[len(at["output_size"])](a[0], at["output_size"])


@impl("adaptive_max_pool")
def _adaptive_max(a, at, ctx):
    fn = {1: F.adaptive_max_pool1d, 2: F.adaptive_max_pool2d, 3: F.adaptive_max_pool3d}
    return fn[len(at["output_size"])](a[0], at["output_size"])


# --- scans
def _scan(fn: Callable[[Tensor, int], Tensor], identity: float) -> Impl:
    def run(a, at, ctx):
        x, d = a[0], at["dim"]
        if at["reverse"]:
            x = x.flip(d)
        if at["exclusive"]:
            pad_shape = list(x.shape)
            pad_shape[d] = 1
            x = torch.cat([torch.full(pad_shape, identity, dtype=x.dtype, device=x.device),
                           x.narrow(d, 0, x.shape[d] - 1)], d)
        y = fn(x, d)
        return y.flip(d) if at["reverse"] else y
    return run


IMPLS["cumsum"] = _scan(torch.cumsum, 0.0)
IMPLS["cumprod"] = _scan(torch.cumprod, 1.0)

# --- data movement
impl("reshape")(lambda a, at, ctx: a[0].reshape(at["shape"]).clone())
impl("permute")(lambda a, at, ctx: a[0].permute(at["dims"]).contiguous())
impl("expand")(lambda a, at, ctx: a[0].expand(at["shape"]).contiguous())
impl("concat")(lambda a, at, ctx: torch.cat(list(a), at["dim"]))
impl("gather")(lambda a, at, ctx: torch.gather(a[0], at["dim"], a[1]))
impl("index_select")(lambda a, at, ctx: torch.index_select(a[0], at["dim"], a[1]))
impl("flip")(lambda a, at, ctx: torch.flip(a[0], at["dims"]))
impl("roll")(lambda a, at, ctx: torch.roll(a[0], at["shifts"], at["dims"]))
impl("unfold")(lambda a, at, ctx: a[0].unfold(at["dim"], at["size"], at["step"]))
impl("tril")(lambda a, at, ctx: torch.tril(a[0], at["diagonal"]))
impl("triu")(lambda a, at, ctx: torch.triu(a[0], at["diagonal"]))
impl("diag")(lambda a, at, ctx: torch.diag(a[0], at["diagonal"]))
impl("repeat")(lambda a, at, ctx: a[0].repeat(at["repeats"]))


@impl("slice")
def _slice(a, at, ctx):
    x, d = a[0], at["dim"]
    idx = [slice(None)] * x.dim()
    idx[d] = slice(at["start"], at["end"], at["step"])
    return x[tuple(idx)].contiguous()


@impl("pad")
def _pad(a, at, ctx):
    if at["mode"] == "constant":
        return F.pad(a[0], at["pads"], "constant", at["value"])
    return F.pad(a[0], at["pads"], at["mode"])


# --- random
@impl("dropout")
def _dropout(a, at, ctx):
    x, p = a[0], at["p"]
    if not at["training"] or p == 0.0:
        return x.clone()
    if p >= 1.0:
        return torch.zeros_like(x)
    keep = torch.rand(x.shape, generator=ctx.generator, device=x.device) >= p
    return torch.where(keep, x / (1.0 - p), torch.zeros((), dtype=x.dtype, device=x.device))


@impl("random")
def _random(a, at, ctx):
    if at["dist"] == "bernoulli":
        out = torch.empty(tuple(at["shape"]), dtype=DTYPES[at["dtype"]], device=ctx.device)
        return out.bernoulli_(at["p"], generator=ctx.generator)
    fn = torch.randn if at["dist"] == "normal" else torch.rand
    return fn(tuple(at["shape"]), dtype=DTYPES[at["dtype"]], generator=ctx.generator, device=ctx.device)


# --- opaque: an ATen op akg does not model, called as-is
def resolve_target(target: str) -> Callable[..., Any]:
    obj: Any = torch.ops
    for part in target.split("."):
        obj = getattr(obj, part)
    return obj


def _decode(v: Any, tensors: Sequence[Tensor | None]) -> Any:
    if isinstance(v, str) and v.startswith("$") and v[1:].isdigit():
        return tensors[int(v[1:])]
    if isinstance(v, str) and v.startswith("$$"):
        return v[1:]
    if isinstance(v, tuple):
        return [_decode(x, tensors) for x in v]
    return v


@impl("opaque")
def _opaque(a, at, ctx):
    fn = resolve_target(at["target"])
    args = [_decode(v, a) for v in at["args"]]
    kwargs = {k: _decode(v, a) for k, v in at["kwargs"]}
    out = fn(*args, **kwargs)
    return out if at.get("item", -1) < 0 else out[at["item"]]


# --- evaluation
def eval_op(op: str, args: Sequence[Tensor | None], attrs: dict[str, Any], ctx: EvalCtx) -> Tensor:
    d = opdef(op)
    if d.group == "composite":
        return (COMPOSITES.get(op) or _composite(op))(list(args), attrs, ctx)
    return IMPLS[op](args, attrs, ctx)


def _composite(op: str) -> Impl:
    """A composite's meaning, its decomposition (`ir.decompose`, the recurrent layers' `ir.recurrence`),
    loaded where first evaluated: registered by the modules that define them, not by importing `ir`."""
    for module in ("ir.decompose", "ir.recurrence"):
        importlib.import_module(module)
    return COMPOSITES[op]


__all__ = ["COMPOSITES", "EvalCtx", "IMPLS", "eval_op"]
