"""Converters for the ops a training graph adds: what AOTAutograd's backward graphs hold after torch's
decompositions (`akg_agent.dynamo_train`) and a few forms they leave."""

from __future__ import annotations

from .aten import ints
from .convert import converts
from .graph import Node


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
