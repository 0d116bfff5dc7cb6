"""Converters for the ops a training graph adds: what AOTAutograd's backward graphs hold after torch's
decompositions (`akg_agent.dynamo_train`) and a few forms they leave."""

from __future__ import annotations

from .aten import ints
from .convert import converts
from .graph import Node
from .sym import is_dynamic


@converts("aten.scatter.value", "aten.scatter.src")
def _scatter(cx, x, dim, index, value):
    """One value per row along `dim` (a loss's backward writes a one-hot), as a comparison with the
    position along `dim`; another scatter stays a torch call."""
    d = dim % len(x.shape)
    one_per_row = index.shape[d] == 1 and all(i == s for k, (i, s) in enumerate(zip(index.shape, x.shape)) if k != d)
    if not one_per_row or (isinstance(value, Node) and list(value.shape) != list(index.shape)):
        return NotImplemented
    pos = cx.add("arange", [], start=0, end=x.shape[d], step=1, dtype=index.dtype)
    pos = cx.add("reshape", [pos], shape=[x.shape[d] if k == d else 1 for k in range(len(x.shape))])
    return cx.add("where", [cx.add("eq", [pos, index]), cx.scalar(value, x), x])


@converts("aten.slice_scatter.default")
def _slice_scatter(cx, base, src, dim=0, start=None, end=None, step=1):
    """`base` with `src` over its slice `start:end` along `dim` (RoPE's backward writes each half of a gradient
    into zeros): `src` padded to `base`'s shape with zeros, where a zero base needs nothing more, else chosen
    over `base` inside the slice. A strided slice or a run-time size stays a torch call."""
    d = dim % base.type.rank
    if step != 1 or any(is_dynamic(s) for s in (*base.shape, *src.shape)):
        return NotImplemented
    size = base.shape[d]
    start, end, _ = slice(start, end, 1).indices(size)
    end = max(end, start)
    if list(src.shape) != [end - start if k == d else s for k, s in enumerate(base.shape)]:
        return NotImplemented
    padded = cx.add("pad", [src], pads=[0, 0] * (base.type.rank - 1 - d) + [start, size - end], value=0.0)
    if base.op == "full" and base.attrs.get("value") == 0:
        return padded
    pos = cx.add("arange", [], start=0, end=size, step=1, dtype="i64")
    pos = cx.add("reshape", [pos], shape=[size if k == d else 1 for k in range(base.type.rank)])
    lo, hi = cx.add("ge", [pos, cx.scalar(start, pos)]), cx.add("lt", [pos, cx.scalar(end, pos)])
    inside = cx.add("logical_and", [lo, hi])
    return cx.add("where", [inside, padded, base])


@converts("aten.convolution_backward.default", bound=True)
def _conv_backward(cx, a):
    """A convolution's three gradients: the input's a transposed convolution of the incoming gradient, the
    weight's torch's own backward-weight call (`conv_weight_grad`: written as a forward convolution with a
    kernel the output's size, fp32 erred 20x more than cuDNN's algorithm on a ResNet stem, and the verifier
    rejected it), the bias's a sum."""
    if a.transposed:
        return NotImplemented
    go, x, w, groups, mask = a.grad_output, a.input, a.weight, a.groups, a.output_mask
    r = w.type.rank - 2
    stride, padding, dilation = ints(a.stride, r), ints(a.padding, r), ints(a.dilation, r)
    k, spatial, out_sp = list(w.shape[2:]), list(x.shape[2:]), list(go.shape[2:])
    gi = gw = gb = None
    if mask[0]:  # the positions a strided convolution never reads get output padding (zeros)
        extra = [s - ((o - 1) * st - 2 * p + d * (kk - 1) + 1)
                 for s, o, st, p, d, kk in zip(spatial, out_sp, stride, padding, dilation, k)]
        gi = cx.add("conv_transpose", [go, w], stride=stride, padding=padding, output_padding=extra,
                    groups=groups, dilation=dilation)
    if mask[1]:
        gw = cx.add("conv_weight_grad", [go, x, w], stride=stride, padding=padding, dilation=dilation, groups=groups)
    if mask[2]:
        gb = cx.add("sum", [go], dims=[0] + list(range(2, r + 2)), keepdim=False)
    return gi, gw, gb
