"""ATen (torch.export) -> graph IR converters. One entry per ATen overload akg understands."""

from __future__ import annotations

from typing import Any

import torch

from .convert import CONVERTERS, LiftCtx, converts
from .einsum import lower_einsum
from .errors import AkgError
from .graph import Node
from .recurrence import RESULTS
from .rnn_trace import RnnSettings
from .sym import DynamicDecision, is_dynamic, size

INT_MAX = 2**62
_REDUCTION = {0: "none", 1: "mean", 2: "sum"}


def ints(v: Any, n: int) -> list[int]:
    if isinstance(v, int):
        return [v] * n
    v = list(v)
    return v * n if len(v) == 1 else v


def _dims(d: Any, rank: int) -> list[int] | None:
    if d is None:
        return None
    d = [d] if isinstance(d, int) else list(d)
    return [x % rank if rank else 0 for x in d] if d else None


# --- elementwise
UNARY = ("neg abs exp log log1p expm1 sqrt rsqrt reciprocal sin cos tanh sigmoid erf sign floor ceil "
         "round trunc relu silu mish selu hardsigmoid hardswish logical_not isnan").split()


def _unary(op: str):
    return lambda cx, x: cx.add(op, [x])


for _op in UNARY:
    converts(f"aten.{_op}.default", f"aten.{_op}_.default")(_unary(_op))
for _p in ("rsqrt", "sqrt", "exp"):  # prims that torch's decompositions write
    converts(f"prims.{_p}.default")(_unary(_p))


@converts("aten.gelu.default", "aten.gelu_.default")
def _gelu(cx, x, approximate="none"):
    return cx.add("gelu", [x], approximate=approximate)


@converts("aten.softplus.default")
def _softplus(cx, x, beta=1.0, threshold=20.0):
    return cx.add("softplus", [x], beta=float(beta), threshold=float(threshold))


@converts("aten.elu.default", "aten.elu_.default")
def _elu(cx, x, alpha=1.0, scale=1.0, input_scale=1.0):
    return cx.add("elu", [x], alpha=float(alpha), scale=float(scale), input_scale=float(input_scale))


@converts("aten.celu.default", "aten.celu_.default")
def _celu(cx, x, alpha=1.0):
    return cx.add("elu", [x], alpha=float(alpha), input_scale=1.0 / float(alpha))


@converts("aten.leaky_relu.default", "aten.leaky_relu_.default")
def _leaky(cx, x, negative_slope=0.01):
    return cx.add("leaky_relu", [x], negative_slope=float(negative_slope))


@converts("aten.hardtanh.default", "aten.hardtanh_.default")
def _hardtanh(cx, x, min_val=-1.0, max_val=1.0):
    return cx.add("hardtanh", [x], min_val=float(min_val), max_val=float(max_val))


@converts("aten.relu6.default")
def _relu6(cx, x):
    return cx.add("hardtanh", [x], min_val=0.0, max_val=6.0)


@converts("aten.clamp.default", "aten.clamp_.default")
def _clamp(cx, x, min=None, max=None):
    return cx.add("clamp", [x], min=min, max=max)


@converts("aten.clamp_min.default", "aten.clamp_min_.default")
def _clamp_min(cx, x, v):
    return cx.add("clamp", [x], min=v)


@converts("aten.clamp_max.default", "aten.clamp_max_.default")
def _clamp_max(cx, x, v):
    return cx.add("clamp", [x], max=v)


@converts("aten.clamp.Tensor")
def _clamp_t(cx, x, min=None, max=None):
    if min is not None:
        x = cx.add("maximum", [x, cx.scalar(min, x)])
    if max is not None:
        x = cx.add("minimum", [x, cx.scalar(max, x)])
    return x


@converts("aten.threshold.default")
def _threshold(cx, x, th, v):
    return cx.add("where", [cx.add("gt", [x, cx.scalar(th, x)]), x, cx.scalar(v, x)])


@converts("aten.square.default")
def _square(cx, x):
    return cx.add("mul", [x, x])


@converts("aten._to_copy.default", "aten.to.dtype", "aten.to.dtype_layout", "aten.to.device",
          "aten.type_as.default")
def _to(cx, x, *args, **kw):
    dt = kw.get("dtype") or next((a for a in args if isinstance(a, torch.dtype)), None)
    if dt is None and args and isinstance(args[0], Node):
        dt = args[0].type.torch_dtype
    if dt is None:
        return x
    return cx.add("cast", [x], dtype=dt) if x.type.torch_dtype != dt else x


# --- binary
def _binary(op: str, swap: bool = False):
    def conv(cx, a, b, alpha=1):
        if not isinstance(a, Node):
            a = cx.scalar(a, b)
        if not isinstance(b, Node):
            b = cx.scalar(b, a)
        if alpha != 1:
            b = cx.add("mul", [b, cx.scalar(alpha, b)])
        return cx.add(op, [b, a] if swap else [a, b])
    return conv


_BINARY_ALIASES = {
    "add": "add", "sub": "sub subtract", "mul": "mul multiply", "pow": "pow", "div": "div divide true_divide",
    "maximum": "maximum max",
    "minimum": "minimum min", "eq": "eq", "ne": "ne not_equal", "lt": "lt less", "le": "le less_equal",
    "gt": "gt greater", "ge": "ge greater_equal",
    "logical_and": "logical_and __and__ bitwise_and", "logical_or": "logical_or __or__ bitwise_or",
    "remainder": "remainder", "atan2": "atan2",
}
for _op, _names in _BINARY_ALIASES.items():
    for _n in _names.split():
        for _ov in ("Tensor", "Scalar", "other", "Tensor_Scalar", "Tensor_Tensor", "default"):
            converts(f"aten.{_n}.{_ov}", f"aten.{_n}_.{_ov}")(_binary(_op))
converts("aten.rsub.Scalar", "aten.rsub.Tensor")(_binary("sub", swap=True))
# `max.default` and `min.default` are reductions; the loop registered them as binary
del CONVERTERS["aten.max.default"], CONVERTERS["aten.min.default"]


@converts("aten.pow.Scalar")
def _pow_scalar(cx, a, b):
    return cx.add("pow", [cx.scalar(a, b), b])


@converts("aten.div.Tensor_mode", "aten.div.Scalar_mode", "aten.divide.Tensor_mode", "aten.divide.Scalar_mode")
def _div_mode(cx, a, b, rounding_mode=None):
    b = b if isinstance(b, Node) else cx.scalar(b, a)
    return cx.add("div", [a, b], rounding_mode=rounding_mode)


@converts("aten.where.self", "aten.where.ScalarOther", "aten.where.ScalarSelf", "aten.where.Scalar")
def _where(cx, c, a, b):
    like = a if isinstance(a, Node) else b if isinstance(b, Node) else None
    return cx.add("where", [c, cx.scalar(a, like), cx.scalar(b, like)])


@converts("aten.masked_fill.Scalar", "aten.masked_fill.Tensor", "aten.masked_fill_.Scalar")
def _masked_fill(cx, x, mask, v):
    return cx.add("where", [mask, cx.scalar(v, x), x])


# --- reductions
def _reduce(op: str):
    def conv(cx, x, dim=None, keepdim=False, dtype=None):
        if dtype is not None:
            x = cx.add("cast", [x], dtype=dtype)
        return cx.add(op, [x], dims=_dims(dim, x.type.rank), keepdim=keepdim)
    return conv


converts("aten.sum.dim_IntList", "aten.sum.default")(_reduce("sum"))
converts("aten.mean.dim", "aten.mean.default")(_reduce("mean"))
converts("aten.amax.default")(_reduce("amax"))
converts("aten.amin.default")(_reduce("amin"))
converts("aten.max.default")(_reduce("amax"))
converts("aten.min.default")(_reduce("amin"))
converts("aten.prod.dim_int", "aten.prod.default")(_reduce("prod"))


@converts("aten.max.dim")
def _max_dim(cx, x, dim, keepdim=False):
    return (cx.add("amax", [x], dims=[dim % x.type.rank], keepdim=keepdim),
            cx.add("argmax", [x], dim=dim, keepdim=keepdim))


@converts("aten.min.dim")
def _min_dim(cx, x, dim, keepdim=False):
    return (cx.add("amin", [x], dims=[dim % x.type.rank], keepdim=keepdim),
            cx.add("argmin", [x], dim=dim, keepdim=keepdim))


@converts("aten.argmax.default")
def _argmax(cx, x, dim=None, keepdim=False):
    return cx.add("argmax", [x], dim=dim, keepdim=keepdim)


@converts("aten.argmin.default")
def _argmin(cx, x, dim=None, keepdim=False):
    return cx.add("argmin", [x], dim=dim, keepdim=keepdim)


def _var_like(op: str):
    def conv(cx, x, dim=None, *rest, correction=None, keepdim=False, unbiased=None):
        # var.dim(x, dim, unbiased, keepdim) and var.correction(x, dim, *, correction, keepdim)
        if rest:
            unbiased = rest[0]
            keepdim = rest[1] if len(rest) > 1 else keepdim
        if correction is None:
            correction = 1.0 if unbiased is None or unbiased else 0.0
        return cx.add(op, [x], dims=_dims(dim, x.type.rank), keepdim=keepdim, correction=float(correction))
    return conv


for _op in ("var", "std"):
    converts(f"aten.{_op}.correction", f"aten.{_op}.dim", f"aten.{_op}.default")(_var_like(_op))


def _var_mean_like(op: str):
    spread = _var_like(op)

    def conv(cx, x, dim=None, *rest, correction=None, keepdim=False, unbiased=None):
        if rest:  # var_mean.dim(x, dim, unbiased, keepdim)
            keepdim = rest[1] if len(rest) > 1 else keepdim
        return (spread(cx, x, dim, *rest, correction=correction, keepdim=keepdim, unbiased=unbiased),
                cx.add("mean", [x], dims=_dims(dim, x.type.rank), keepdim=keepdim))
    return conv


for _op in ("var", "std"):
    converts(f"aten.{_op}_mean.correction", f"aten.{_op}_mean.dim", f"aten.{_op}_mean.default")(
        _var_mean_like(_op))


@converts("aten.linalg_vector_norm.default")
def _vnorm(cx, x, ord=2, dim=None, keepdim=False, dtype=None):
    return cx.add("norm", [x], dims=_dims(dim, x.type.rank), keepdim=keepdim, ord=float(ord))


@converts("aten.norm.ScalarOpt_dim", "aten.norm.Scalar", "aten.norm.ScalarOpt_dim_dtype")
def _norm(cx, x, p=2, dim=None, keepdim=False, dtype=None):
    return _vnorm(cx, x, 2 if p is None else p, dim, keepdim)


@converts("aten.logsumexp.default")
def _lse(cx, x, dim, keepdim=False):
    return cx.add("logsumexp", [x], dims=_dims(dim, x.type.rank), keepdim=keepdim)


@converts("aten.softmax.int", "aten._softmax.default")
def _softmax(cx, x, dim, dtype=None):
    if isinstance(dtype, torch.dtype):
        x = cx.add("cast", [x], dtype=dtype)
    return cx.add("softmax", [x], dim=dim % max(x.type.rank, 1))


@converts("aten.log_softmax.int", "aten._log_softmax.default")
def _log_softmax(cx, x, dim, dtype=None):
    if isinstance(dtype, torch.dtype):
        x = cx.add("cast", [x], dtype=dtype)
    return cx.add("log_softmax", [x], dim=dim % max(x.type.rank, 1))


# --- contractions
@converts("aten.linear.default")
def _linear(cx, x, w, b=None):
    return cx.add("linear", [x, w] + ([b] if b is not None else []))


@converts("aten.matmul.default", "aten.mm.default", "aten.bmm.default")
def _matmul(cx, a, b):
    return cx.add("matmul", [a, b])


@converts("aten.addmm.default", "aten.baddbmm.default")
def _addmm(cx, bias, a, b, beta=1, alpha=1):
    mm = cx.add("matmul", [a, b])
    if alpha != 1:
        mm = cx.add("mul", [mm, cx.scalar(alpha, mm)])
    if beta != 1:
        bias = cx.add("mul", [bias, cx.scalar(beta, bias)])
    return cx.add("add", [mm, bias])


def _conv(cx, x, w, b, stride, padding, dilation, groups):
    r = w.type.rank - 2
    stride, dilation = ints(stride, r), ints(dilation, r)
    if isinstance(padding, str):
        k = w.shape[2:]
        if padding == "valid":
            padding = [0] * r
        else:  # "same": torch puts the odd extra pad on the right
            total = [d * (kk - 1) for d, kk in zip(dilation, k)]
            padding = [t // 2 for t in total]
            extra = [t - 2 * (t // 2) for t in total]
            if any(extra):
                pads: list[int] = []
                for e in reversed(extra):
                    pads += [0, e]
                x = cx.add("pad", [x], pads=pads)
    args = [x, w] + ([b] if b is not None else [])
    return cx.add("conv", args, stride=stride, padding=ints(padding, r), dilation=dilation, groups=groups)


@converts("aten.conv1d.default", "aten.conv2d.default", "aten.conv3d.default", "aten.conv1d.padding",
          "aten.conv2d.padding", "aten.conv3d.padding")
def _convnd(cx, x, w, b=None, stride=1, padding=0, dilation=1, groups=1):
    return _conv(cx, x, w, b, stride, padding, dilation, groups)


@converts("aten.conv_transpose1d.default", "aten.conv_transpose2d.input", "aten.conv_transpose3d.input",
          bound=True)
def _conv_t(cx, a):
    r = a.weight.type.rank - 2
    args = [a.input, a.weight] + ([a.bias] if a.bias is not None else [])
    return cx.add("conv_transpose", args, stride=ints(a.stride, r), padding=ints(a.padding, r),
                  output_padding=ints(a.output_padding, r), groups=a.groups, dilation=ints(a.dilation, r))


@converts("aten.convolution.default", "aten._convolution.default", bound=True)
def _convolution(cx, a):
    if a.transposed:
        return _conv_t(cx, a)
    return _conv(cx, a.input, a.weight, a.bias, a.stride, a.padding, a.dilation, a.groups)


@converts("aten.einsum.default")
def _einsum(cx, eq, operands, path=None):
    return lower_einsum(cx, eq.replace(" ", ""), list(operands))


# --- windows
def pool_args(kernel, stride, padding, r):
    kernel = ints(kernel, r)
    stride = ints(stride, r) if stride not in (None, [], ()) else kernel
    return kernel, stride, ints(padding, r)


@converts("aten.max_pool1d.default", "aten.max_pool2d.default", "aten.max_pool3d.default")
def _max_pool(cx, x, kernel, stride=(), padding=0, dilation=1, ceil_mode=False):
    r = len(ints(kernel, 1)) if not isinstance(kernel, int) else None
    name = cx.fx_node.target.__name__ if cx.fx_node is not None else ""
    r = int(name.split("pool")[1][0]) if "pool" in name else (r or 2)
    k, s, p = pool_args(kernel, stride, padding, r)
    return cx.add("max_pool", [x], kernel=k, stride=s, padding=p, dilation=ints(dilation, r),
                  ceil_mode=ceil_mode)


@converts("aten.max_pool1d_with_indices.default", "aten.max_pool2d_with_indices.default",
          "aten.max_pool3d_with_indices.default")
def _max_pool_idx(cx, x, kernel, stride=(), padding=0, dilation=1, ceil_mode=False):
    """The maxima and where they are (a training graph saves those for the backward pass; an unused
    indices node is dropped with the dead code)."""
    values = _max_pool(cx, x, kernel, stride, padding, dilation, ceil_mode)
    return values, cx.add("max_pool_indices", [x], **values.attrs)


def _no_indices(cx):
    class _Unsupported:
        def __getattr__(self, item):
            raise AkgError(f"pooling indices are not supported (at {cx.fx_node.name})")
    return _Unsupported()


@converts("aten.avg_pool1d.default", "aten.avg_pool2d.default", "aten.avg_pool3d.default")
def _avg_pool(cx, x, kernel, stride=(), padding=0, ceil_mode=False, count_include_pad=True,
              divisor_override=None):
    name = cx.fx_node.target.__name__
    r = int(name.split("pool")[1][0])
    k, s, p = pool_args(kernel, stride, padding, r)
    return cx.add("avg_pool", [x], kernel=k, stride=s, padding=p, ceil_mode=ceil_mode,
                  count_include_pad=count_include_pad, divisor_override=divisor_override)


@converts("aten.adaptive_avg_pool1d.default", "aten.adaptive_avg_pool2d.default",
          "aten.adaptive_avg_pool3d.default", "aten._adaptive_avg_pool2d.default")
def _adaptive_avg(cx, x, output_size):
    r = int(cx.fx_node.target.__name__.split("pool")[1][0])
    return cx.add("adaptive_avg_pool", [x], output_size=ints(output_size, r))


@converts("aten.adaptive_max_pool1d.default", "aten.adaptive_max_pool2d.default",
          "aten.adaptive_max_pool3d.default")
def _adaptive_max(cx, x, output_size):
    r = int(cx.fx_node.target.__name__.split("pool")[1][0])
    return (cx.add("adaptive_max_pool", [x], output_size=ints(output_size, r)), _no_indices(cx))


# --- scans
@converts("aten.cumsum.default", "aten.cumsum_.default")
def _cumsum(cx, x, dim, dtype=None):
    if dtype is not None:
        x = cx.add("cast", [x], dtype=dtype)
    return cx.add("cumsum", [x], dim=dim % x.type.rank)


@converts("aten.cumprod.default")
def _cumprod(cx, x, dim, dtype=None):
    if dtype is not None:
        x = cx.add("cast", [x], dtype=dtype)
    return cx.add("cumprod", [x], dim=dim % x.type.rank)


# --- data movement
@converts("aten.sym_size.int")
def _sym_size(cx, x, d):
    return x.shape[d]  # a run-time size (ir.sym.Dyn) where --dynamic names the dimension


@converts("aten.view.default", "aten.reshape.default", "aten._unsafe_view.default",
          "aten.flatten.using_ints", "aten.unflatten.int", "aten.squeeze.dim", "aten.squeeze.dims",
          "aten.squeeze.default", "aten.unsqueeze.default", "aten.unsqueeze_.default",
          "aten.view_as.default", "aten.reshape_as.default", "aten.squeeze_.dim")
def _reshape(cx, x, *a, **k):
    shape = cx.out_shape()
    return x if list(x.shape) == shape else cx.add("reshape", [x], shape=shape)


@converts("aten.expand.default", "aten.expand_as.default", "aten.broadcast_to.default")
def _expand(cx, x, *a, **k):
    shape = cx.out_shape()
    return x if list(x.shape) == shape else cx.add("expand", [x], shape=shape)


@converts("aten.copy_.default", "aten.copy.default")
def _copy(cx, dst, src, non_blocking=False):
    """dst's new value: src broadcast to dst's shape in dst's dtype (a buffer written in place)."""
    if list(src.shape) != list(dst.shape):
        src = cx.add("expand", [src], shape=list(dst.shape))
    return src if src.type.torch_dtype == dst.type.torch_dtype else cx.add("cast", [src], dtype=dst.type.torch_dtype)


@converts("aten.broadcast_tensors.default")
def _broadcast_tensors(cx, tensors):
    shape = list(torch.broadcast_shapes(*[t.shape for t in tensors]))
    return tuple(t if list(t.shape) == shape else cx.add("expand", [t], shape=shape) for t in tensors)


@converts("aten.permute.default")
def _permute(cx, x, dims):
    dims = [d % x.type.rank for d in dims]
    return x if dims == sorted(dims) else cx.add("permute", [x], dims=dims)


@converts("aten.transpose.int")
def _transpose(cx, x, d0, d1):
    p = list(range(x.type.rank))
    d0, d1 = d0 % max(x.type.rank, 1), d1 % max(x.type.rank, 1)
    p[d0], p[d1] = p[d1], p[d0]
    return _permute(cx, x, p)


@converts("aten.t.default", "aten.numpy_T.default", "aten.mT.default")
def _t(cx, x):
    if x.type.rank < 2:
        return x
    if cx.fx_node.target.__name__.startswith("numpy_T"):
        return _permute(cx, x, list(reversed(range(x.type.rank))))
    return _transpose(cx, x, -2, -1)


@converts("aten.contiguous.default", "aten.clone.default", "aten.alias.default", "aten.detach.default",
          "aten.lift_fresh_copy.default", "aten.detach_.default", "aten.dropout_.default")
def _identity(cx, x, *a, **k):
    return x


@converts("aten._assert_tensor_metadata.default", "aten._assert_scalar.default")
def _ignore(cx, *a, **k):
    return None


def _slice_node(cx: LiftCtx, x: Node, dim: int, start: int | None, end: int | None, step: int = 1) -> Node:
    dim %= x.type.rank
    size = x.shape[dim]
    if is_dynamic(size):
        start, end = _dynamic_bounds(size, start, end, step)
    else:
        start, end, _ = slice(start, end, step).indices(size)
        end = max(end, start)
    if start == 0 and end == size and step == 1:
        return x
    return cx.add("slice", [x], dim=dim, start=start, end=end, step=step)


def _dynamic_bounds(size: Any, start: int | None, end: int | None, step: int) -> tuple[Any, Any]:
    """A slice of a run-time size: its bounds must hold for every size from 1 (the envelope), so
    offsets from either end are at most one element."""
    def bound(v: int | None, default: Any) -> Any:
        if v is None:
            return default
        if is_dynamic(v):
            return v
        if -1 <= v <= 1:
            return size + v if v < 0 else v
        raise DynamicDecision(f"a slice at {v} of a run-time size ({size}) is out of range at sizes below {abs(v)}; "
                              "leave that dimension static")
    if step != 1 and (start not in (None, 0) or end is not None):
        raise DynamicDecision(f"a strided slice of a run-time size ({size}) with bounds; leave that dimension static")
    return bound(start, 0), bound(end, size)


@converts("aten.slice.Tensor")
def _slice(cx, x, dim=0, start=None, end=None, step=1):
    return _slice_node(cx, x, dim, start, None if end is not None and end >= INT_MAX else end, step)


@converts("aten.select.int")
def _select(cx, x, dim, index):
    dim %= x.type.rank
    if is_dynamic(x.shape[dim]) and index == -1:
        index = x.shape[dim] - 1  # the last element exists at every size
    elif is_dynamic(x.shape[dim]) and index != 0:
        raise DynamicDecision(f"element {index} of a run-time size ({x.shape[dim]}) is missing at smaller sizes; "
                              "leave that dimension static")
    else:
        index %= x.shape[dim]
    s = _slice_node(cx, x, dim, index, index + 1)
    return cx.add("reshape", [s], shape=[d for i, d in enumerate(x.shape) if i != dim])


@converts("aten.narrow.default")
def _narrow(cx, x, dim, start, length):
    return _slice_node(cx, x, dim, start, start + length)


@converts("aten.cat.default", "aten.concat.default")
def _cat(cx, tensors, dim=0):
    tensors = [t for t in tensors if t.type.numel > 0 or t.type.rank > 1]
    return tensors[0] if len(tensors) == 1 else cx.add("concat", tensors, dim=dim % tensors[0].type.rank)


@converts("aten.stack.default")
def _stack(cx, tensors, dim=0):
    rank = tensors[0].type.rank + 1
    dim %= rank
    parts = []
    for t in tensors:
        shape = list(t.shape)
        shape.insert(dim, 1)
        parts.append(cx.add("reshape", [t], shape=shape))
    return parts[0] if len(parts) == 1 else cx.add("concat", parts, dim=dim)


@converts("aten.split.Tensor", "aten.unsafe_split.Tensor", "aten.split_with_sizes.default", "aten.chunk.default",
          "aten.unbind.int", "aten.tensor_split.sections")
def _split(cx, x, sizes=None, dim=0):
    name = cx.fx_node.target.__name__
    dim %= x.type.rank
    n = x.shape[dim]
    if name.startswith("unbind"):
        dim = (sizes or 0) % x.type.rank
        n = x.shape[dim]
        return tuple(_select(cx, x, dim, i) for i in range(n))
    if name.startswith("chunk"):
        step = -(-n // sizes)
        bounds = list(range(0, n, step))
        lens = [min(step, n - b) for b in bounds]
    elif isinstance(sizes, int):
        bounds = list(range(0, n, sizes))
        lens = [min(sizes, n - b) for b in bounds]
    else:
        lens = list(sizes)
        bounds = [sum(lens[:i]) for i in range(len(lens))]
    return tuple(_slice_node(cx, x, dim, b, b + ln) for b, ln in zip(bounds, lens))


@converts("aten.pad.default", "aten.constant_pad_nd.default")
def _pad(cx, x, pad, mode="constant", value=None):
    if cx.fx_node.target.__name__.startswith("constant_pad_nd"):
        mode, value = "constant", mode if not isinstance(mode, str) else 0.0
    return cx.add("pad", [x], pads=list(pad), mode=mode, value=float(value or 0.0))


@converts("aten.gather.default")
def _gather(cx, x, dim, index, sparse_grad=False):
    return cx.add("gather", [x, index], dim=dim % x.type.rank)


@converts("aten.embedding.default")
def _embedding(cx, weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    # rows of the table picked by each index: a gather the consumer computes as it loads (the padding row and
    # the gradient's scaling matter only to the backward, which stays torch's op)
    flat = cx.add("reshape", [indices], shape=[indices.type.numel])
    rows = cx.add("index_select", [weight, flat], dim=0)
    return cx.add("reshape", [rows], shape=[*indices.type.shape, weight.type.shape[1]])


@converts("aten.index_select.default")
def _index_select(cx, x, dim, index):
    return cx.add("index_select", [x, index], dim=dim % x.type.rank)


@converts("aten.index.Tensor")
def _index(cx, x, indices):
    live = [(i, t) for i, t in enumerate(indices) if t is not None]
    if len(live) != 1 or live[0][1].type.rank != 1 or live[0][1].dtype not in ("i64", "i32"):
        if cx.allow_opaque:  # a torch call inside the written module
            return NotImplemented
        raise AkgError(f"advanced indexing beyond one integer index vector is not supported (at "
                       f"{cx.fx_node.name})")
    return cx.add("index_select", [x, live[0][1]], dim=live[0][0])


@converts("aten.roll.default")
def _roll(cx, x, shifts, dims=()):
    shifts = [shifts] if isinstance(shifts, int) else list(shifts)
    dims = [dims] if isinstance(dims, int) else list(dims)
    if not dims:  # torch rolls the flattened tensor, then restores its shape
        flat = cx.add("reshape", [x], shape=[x.type.numel])
        return cx.add("reshape", [cx.add("roll", [flat], shifts=shifts, dims=[0])], shape=list(x.shape))
    return cx.add("roll", [x], shifts=shifts, dims=[d % x.type.rank for d in dims])


@converts("aten.unfold.default")
def _unfold(cx, x, dimension, size, step):
    return cx.add("unfold", [x], dim=dimension % max(x.type.rank, 1), size=size, step=step)


@converts("aten.flip.default")
def _flip(cx, x, dims):
    return cx.add("flip", [x], dims=[d % x.type.rank for d in dims])


@converts("aten.tril.default")
def _tril(cx, x, diagonal=0):
    return cx.add("tril", [x], diagonal=diagonal)


@converts("aten.triu.default")
def _triu(cx, x, diagonal=0):
    return cx.add("triu", [x], diagonal=diagonal)


@converts("aten.diag.default")
def _diag(cx, x, diagonal=0):
    return cx.add("diag", [x], diagonal=diagonal)


@converts("aten.repeat.default")
def _repeat(cx, x, repeats):
    return cx.add("repeat", [x], repeats=list(repeats))


# --- creation
def _dt(dtype: Any, default: str = "f32") -> Any:
    return dtype if dtype is not None else default


@converts("aten.zeros.default", "aten.ones.default", "aten.full.default", "aten.empty.memory_format",
          "aten.zeros_like.default", "aten.ones_like.default", "aten.full_like.default",
          "aten.empty_like.default", "aten.new_zeros.default", "aten.new_ones.default",
          "aten.new_full.default", "aten.scalar_tensor.default")
def _full(cx, *args, **kw):
    name = cx.fx_node.target.__name__
    val = cx.fx_node.meta["val"]
    if "ones" in name:
        fill = 1
    elif "full" in name:
        fill = args[-1] if not name.startswith("new") else args[2]
    elif name.startswith("scalar_tensor"):
        fill = args[0]
    else:
        fill = 0
    dt = str(val.dtype)
    fill = bool(fill) if dt == "torch.bool" else float(fill) if val.dtype.is_floating_point else int(fill)
    shape = [size(d) for d in val.shape]
    if not shape:
        return cx.add("scalar", [], value=fill, dtype=val.dtype)
    return cx.add("full", [], shape=shape, value=fill, dtype=val.dtype)


@converts("aten.randn.default", "aten.rand.default", "aten.randn_like.default", "aten.rand_like.default")
def _random(cx, *args, **kw):
    """Random tensors made inside forward: the same draws as torch's under the same seed (the written
    module calls torch's generator in the same order)."""
    val = cx.fx_node.meta["val"]
    dist = "normal" if "randn" in str(cx.fx_node.target) else "uniform"
    return cx.add("random", [], dist=dist, shape=[size(d) for d in val.shape], dtype=val.dtype)


@converts("aten.bernoulli.p")
def _bernoulli(cx, x, p=0.5, generator=None):
    """Ones with probability p, drawn as torch's `empty_like(x).bernoulli_(p)` (a training dropout's mask on
    the CPU, `akg_agent.dynamo_train`): the written module makes that very call on the same generator."""
    if generator is not None or not isinstance(p, (int, float)):
        return NotImplemented
    return cx.add("random", [], dist="bernoulli", p=float(p), shape=[size(d) for d in x.shape], dtype=x.dtype)


@converts("aten.arange.default", "aten.arange.start", "aten.arange.start_step")
def _arange(cx, *args, **kw):
    nums = [a for a in args if isinstance(a, (int, float))]
    start, end, step = (0, nums[0], 1) if len(nums) == 1 else (nums[0], nums[1], nums[2] if len(nums) > 2 else 1)
    return cx.add("arange", [], start=start, end=end, step=step, dtype=cx.fx_node.meta["val"].dtype)


# --- random
@converts("aten.dropout.default", "aten.feature_dropout.default", "aten.alpha_dropout.default")
def _dropout(cx, x, p, train):
    name = cx.fx_node.target.__name__
    if train and p > 0 and not name.startswith("dropout"):
        raise AkgError(f"{name} in training mode is not supported (at {cx.fx_node.name}); lift in eval mode")
    return cx.add("dropout", [x], p=float(p), training=bool(train))


# --- composites
@converts("aten.batch_norm.default", bound=True)
def _batch_norm(cx, a):
    return cx.add("batch_norm", [a.input, a.weight, a.bias, a.running_mean, a.running_var],
                  training=bool(a.training), momentum=float(a.momentum or 0.0), eps=float(a.eps))


@converts("aten.instance_norm.default", bound=True)
def _instance_norm(cx, a):
    if not a.use_input_stats:
        return cx.add("batch_norm", [a.input, a.weight, a.bias, a.running_mean, a.running_var], training=False,
                      eps=float(a.eps))
    return cx.add("instance_norm", [a.input, a.weight, a.bias], eps=float(a.eps))


@converts("aten.group_norm.default")
def _group_norm(cx, x, groups, w=None, b=None, eps=1e-5, cudnn=True):
    return cx.add("group_norm", [x, w, b], groups=groups, eps=float(eps))


@converts("aten.layer_norm.default")
def _layer_norm(cx, x, shape, w=None, b=None, eps=1e-5, cudnn=True):
    return cx.add("layer_norm", [x, w, b], normalized_shape=list(shape), eps=float(eps))


@converts("aten.rms_norm.default")
def _rms_norm(cx, x, shape, w=None, eps=None):
    return cx.add("rms_norm", [x, w], normalized_shape=list(shape), eps=eps)


@converts("aten.scaled_dot_product_attention.default", bound=True)
def _sdpa(cx, a):
    if a.dropout_p:
        raise AkgError(f"attention with dropout_p={a.dropout_p} is not supported (at {cx.fx_node.name})")
    if a.enable_gqa or a.query.shape[:-2] != a.key.shape[:-2]:
        raise AkgError(f"grouped-query attention is not supported yet (at {cx.fx_node.name})")
    args = [a.query, a.key, a.value] + ([a.attn_mask] if a.attn_mask is not None else [])
    return cx.add("attention", args, scale=a.scale, causal=bool(a.is_causal))


@converts("aten.cosine_similarity.default")
def _cosine(cx, x1, x2, dim=1, eps=1e-8):
    return cx.add("cosine_similarity", [x1, x2], dim=dim, eps=float(eps))


@converts("aten.pairwise_distance.default")
def _pairwise(cx, x1, x2, p=2.0, eps=1e-6, keepdim=False):
    d = cx.add("add", [cx.add("sub", [x1, x2]), cx.scalar(float(eps), x1)])
    return cx.add("norm", [d], dims=[d.type.rank - 1], keepdim=keepdim, ord=float(p))


def _loss(op: str, **extra_names: int):
    def conv(cx, x, y, reduction=1, *rest, **kw):
        attrs = {"reduction": _REDUCTION[reduction]}
        for (name, pos) in extra_names.items():
            if len(rest) > pos:
                attrs[name] = rest[pos]
            elif name in kw:
                attrs[name] = kw[name]
        attrs = {k: float(v) if isinstance(v, int) and not isinstance(v, bool) and k != "reduction" else v
                 for k, v in attrs.items()}
        return cx.add(op, [x, y], **attrs)
    return conv


converts("aten.mse_loss.default")(_loss("mse_loss"))
converts("aten.huber_loss.default")(_loss("huber_loss", delta=0))
converts("aten.smooth_l1_loss.default")(_loss("smooth_l1_loss", beta=0))
converts("aten.kl_div.default")(_loss("kl_div", log_target=0))


@converts("aten.hinge_embedding_loss.default")
def _hinge(cx, x, y, margin=1.0, reduction=1):
    return cx.add("hinge_embedding_loss", [x, y], margin=float(margin), reduction=_REDUCTION[reduction])


@converts("aten.l1_loss.default")
def _l1(cx, x, y, reduction=1):
    d = cx.add("abs", [cx.add("sub", [x, y])])
    red = _REDUCTION[reduction]
    return d if red == "none" else cx.add(red, [d], dims=None, keepdim=False)


@converts("aten.cross_entropy_loss.default")
def _cross_entropy(cx, x, t, weight=None, reduction=1, ignore_index=-100, label_smoothing=0.0):
    if weight is not None:
        raise AkgError(f"cross_entropy with class weights is not supported yet (at {cx.fx_node.name})")
    return cx.add("cross_entropy", [x, t], reduction=_REDUCTION[reduction], ignore_index=ignore_index,
                  label_smoothing=float(label_smoothing))


@converts("aten.triplet_margin_loss.default", bound=True)
def _triplet(cx, a):
    return cx.add("triplet_margin_loss", [a.anchor, a.positive, a.negative], margin=float(a.margin), p=float(a.p),
                  eps=float(a.eps), swap=bool(a.swap), reduction=_REDUCTION[a.reduction])


# --- recurrent layers: one `recurrence` node per result torch returns (unused ones are dead code)
def _layers(cx, x, h0, c0, params, s: RnnSettings):
    dirs = 2 if s.bidirectional else 1
    per = 4 if s.has_biases else 2
    if len(params) != s.num_layers * dirs * per:
        raise AkgError(f"{s.cell} with proj_size is not supported yet (at {cx.fx_node.name}); "
                       "use proj_size=0 or --allow-opaque")
    if s.train and s.dropout > 0 and s.num_layers > 1:
        raise AkgError(f"{s.cell} dropout between layers in training mode is not supported (at "
                       f"{cx.fx_node.name}); lift in eval mode")
    attrs = dict(cell=s.cell, hidden=int(params[1].shape[1]), layers=int(s.num_layers),
                 bidirectional=bool(s.bidirectional), batch_first=bool(s.batch_first), has_biases=bool(s.has_biases))
    results = RESULTS if s.cell == "lstm" else RESULTS[:2]
    return tuple(cx.add("recurrence", [x, h0, c0, *params], result=r, **attrs) for r in results)


def _recurrent(cell: str):
    def conv(cx, a):
        h0, c0 = (a.hx[0], a.hx[1]) if cell == "lstm" else (a.hx, None)
        return _layers(cx, a.input, h0, c0, a.params, RnnSettings(cell, a.has_biases, a.num_layers, a.dropout,
                                                                   a.train, a.bidirectional, a.batch_first))
    return conv


@converts("akg.rnn.default", bound=True)  # the same layers as traced by ir.rnn_trace
def _rnn(cx, a):
    s = RnnSettings.parse(a.settings)
    return _layers(cx, a.x, a.hx[0], a.hx[1] if s.cell == "lstm" else None, a.params, s)


for _cell in ("lstm", "gru", "rnn_tanh", "rnn_relu"):
    converts(f"aten.{_cell}.input", bound=True)(_recurrent(_cell))


@converts("aten.bitwise_not.default")
def _bitwise_not(cx, x):
    if x.dtype == "bool":
        return cx.add("logical_not", [x])
    if x.dtype in ("f16", "bf16", "f32", "f64"):
        raise AkgError(f"bitwise_not of a floating tensor (at {cx.fx_node.name}) is not defined")
    return cx.add("sub", [cx.add("neg", [x]), cx.scalar(1, x)])  # two's complement: ~x = -x - 1
