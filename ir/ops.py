"""The closed set of graph-IR ops, in named groups, with their attribute schemas.

An op's *meaning* lives in `ir.interp` (primitives) and `ir.decompose` (composites); this module
only says what exists, how many tensor operands it takes and which attributes it accepts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from .sym import keeping_symints, size
from .types import dtype_of

REQUIRED = object()  # marks an attribute without a default

# op group -> the kind of kernel it anchors (used by fusion and the cost model)
GROUP_KIND = {
    "source": "source",
    "unary": "pointwise",
    "binary": "pointwise",
    "ternary": "pointwise",
    "reduction": "reduction",
    "contraction": "contraction",
    "window": "window",
    "scan": "scan",
    "movement": "movement",
    "random": "pointwise",
    "composite": "composite",
    "opaque": "opaque",
}


@dataclass(frozen=True)
class OpDef:
    name: str
    group: str
    min_args: int
    max_args: int | None  # None: variadic
    attrs: dict[str, Any] = field(default_factory=dict)
    kind: str = ""  # kernel kind; defaults to the group's

    @property
    def fusion_kind(self) -> str:
        return self.kind or GROUP_KIND[self.group]

    def defaults(self) -> dict[str, Any]:
        return {k: v for k, v in self.attrs.items() if v is not REQUIRED}

    def required(self) -> list[str]:
        return [k for k, v in self.attrs.items() if v is REQUIRED]


OPS: dict[str, OpDef] = {}


def _def(name: str, group: str, nargs: int | tuple[int, int | None], kind: str = "", **attrs: Any) -> None:
    lo, hi = (nargs, nargs) if isinstance(nargs, int) else nargs
    OPS[name] = OpDef(name, group, lo, hi, dict(attrs), kind)


R = REQUIRED
# --- sources: graph inputs, parameters (state_dict entries) and constants
_def("input", "source", 0)
_def("param", "source", 0, key=R)
_def("scalar", "source", 0, value=R, dtype="f32")
_def("full", "source", 0, shape=R, value=R, dtype="f32")
_def("arange", "source", 0, start=0, end=R, step=1, dtype="i64")

# --- elementwise: unary
for _n in ("neg abs exp log log1p expm1 sqrt rsqrt reciprocal sin cos tanh sigmoid erf sign floor "
           "ceil round trunc relu silu mish selu hardsigmoid hardswish logical_not isnan").split():
    _def(_n, "unary", 1)
_def("gelu", "unary", 1, approximate="none")
_def("softplus", "unary", 1, beta=1.0, threshold=20.0)
_def("elu", "unary", 1, alpha=1.0, scale=1.0, input_scale=1.0)
_def("leaky_relu", "unary", 1, negative_slope=0.01)
_def("hardtanh", "unary", 1, min_val=-1.0, max_val=1.0)
_def("clamp", "unary", 1, min=None, max=None)
_def("cast", "unary", 1, dtype=R)

# --- elementwise: binary (scalars are `scalar` nodes, broadcast like torch)
for _n in ("add sub mul pow maximum minimum eq ne lt le gt ge logical_and logical_or remainder "
           "atan2").split():
    _def(_n, "binary", 2)
_def("div", "binary", 2, rounding_mode=None)
# --- elementwise: ternary
_def("where", "ternary", 3)

# --- reductions (dims=None reduces every axis)
for _n in ("sum", "mean", "amax", "amin", "prod"):
    _def(_n, "reduction", 1, dims=None, keepdim=False)
_def("var", "reduction", 1, dims=None, keepdim=False, correction=1.0)
_def("std", "reduction", 1, dims=None, keepdim=False, correction=1.0)
_def("norm", "reduction", 1, dims=None, keepdim=False, ord=2.0)
_def("argmax", "reduction", 1, dim=None, keepdim=False)
_def("argmin", "reduction", 1, dim=None, keepdim=False)

# --- contractions
_def("matmul", "contraction", 2)
_def("linear", "contraction", (2, 3))  # x @ w.T (+ b)
# channels_last: x and the result hold their channels on the last axis (N, *spatial, C); the weight stays
# (Cout, Cin/groups, *kernel)
_def("conv", "contraction", (2, 3), stride=R, padding=R, dilation=R, groups=1, channels_last=False)
_def("conv_transpose", "contraction", (2, 3), stride=R, padding=R, output_padding=R, dilation=R,
     groups=1, channels_last=False)
# a convolution's weight gradient from the incoming gradient, the input and the weight (its shape): torch's
# own (cuDNN's backward-weight algorithm: as a forward convolution with a kernel the output's size, fp32
# errs 20x more on a ResNet stem)
_def("conv_weight_grad", "contraction", 3, stride=R, padding=R, dilation=R, groups=1)

# --- windows (rank = len(kernel) spatial dims at the end)
_def("max_pool", "window", 1, kernel=R, stride=R, padding=R, dilation=R, ceil_mode=False)
# where each window's maximum is (its flat position in the input's spatial plane, torch's convention): what a
# training graph saves for max pooling's backward
_def("max_pool_indices", "window", 1, kernel=R, stride=R, padding=R, dilation=R, ceil_mode=False)
_def("avg_pool", "window", 1, kernel=R, stride=R, padding=R, ceil_mode=False,
     count_include_pad=True, divisor_override=None)
_def("adaptive_avg_pool", "window", 1, output_size=R)
_def("adaptive_max_pool", "window", 1, output_size=R)

# --- scans
_def("cumsum", "scan", 1, dim=R, reverse=False, exclusive=False)
_def("cumprod", "scan", 1, dim=R, reverse=False, exclusive=False)

# --- data movement
_def("reshape", "movement", 1, shape=R)
_def("permute", "movement", 1, dims=R)
_def("slice", "movement", 1, dim=R, start=R, end=R, step=1)
_def("expand", "movement", 1, shape=R)
_def("concat", "movement", (1, None), dim=R)
_def("pad", "movement", 1, pads=R, mode="constant", value=0.0)
_def("gather", "movement", 2, dim=R)
_def("index_select", "movement", 2, dim=R)
_def("flip", "movement", 1, dims=R)
_def("roll", "movement", 1, shifts=R, dims=R)  # torch.roll along each of dims (a roll of the flat tensor is reshaped)
_def("unfold", "movement", 1, dim=R, size=R, step=R)  # Tensor.unfold: windows of `size` every `step`, a new last dim
_def("tril", "movement", 1, diagonal=0)
_def("triu", "movement", 1, diagonal=0)
_def("diag", "movement", 1, diagonal=0)
_def("repeat", "movement", 1, repeats=R)

# --- random
_def("dropout", "random", 1, p=R, training=False)
# torch.randn / torch.rand inside forward, drawn from torch's global generator (or the evaluation's)
_def("random", "random", 0, dist=R, shape=R, dtype="f32", p=0.5)  # p: a bernoulli draw's probability

# --- composites: kept for matching, each decomposable into the primitives above (ir.decompose)
_def("softmax", "composite", 1, "reduction", dim=R)
_def("log_softmax", "composite", 1, "reduction", dim=R)
_def("logsumexp", "composite", 1, "reduction", dims=R, keepdim=False)
# batch_norm(x, weight?, bias?, running_mean?, running_var?): an absent operand is a None arg
_def("batch_norm", "composite", 5, "reduction", training=False, momentum=0.1, eps=1e-5)
_def("instance_norm", "composite", 3, "reduction", eps=1e-5)
_def("group_norm", "composite", 3, "reduction", groups=R, eps=1e-5)
_def("layer_norm", "composite", 3, "reduction", normalized_shape=R, eps=1e-5)
_def("rms_norm", "composite", 2, "reduction", normalized_shape=R, eps=None)
# nan_rows: a query whose every score is -inf answers NaN (a written-out softmax's) instead of torch's 0
_def("attention", "composite", (3, 4), "contraction", scale=None, causal=False, nan_rows=False)
_def("cosine_similarity", "composite", 2, "reduction", dim=1, eps=1e-8)
_def("mse_loss", "composite", 2, "reduction", reduction="mean")
_def("cross_entropy", "composite", 2, "reduction", reduction="mean", label_smoothing=0.0,
     ignore_index=-100)
_def("huber_loss", "composite", 2, "reduction", reduction="mean", delta=1.0)
_def("smooth_l1_loss", "composite", 2, "reduction", reduction="mean", beta=1.0)
_def("kl_div", "composite", 2, "reduction", reduction="mean", log_target=False)
_def("triplet_margin_loss", "composite", 3, "reduction", margin=1.0, p=2.0, eps=1e-6, swap=False,
     reduction="mean")
# nn.RNN / nn.LSTM / nn.GRU (ir.recurrence): x, h0, c0 (LSTM, else None), then torch's flat weights
_def("recurrence", "composite", (4, None), "contraction", cell=R, hidden=R, layers=R, bidirectional=False,
     batch_first=False, has_biases=True, result="output")
_def("hinge_embedding_loss", "composite", 2, "reduction", margin=1.0, reduction="mean")

# --- an op akg leaves to torch (lifted with --allow-opaque); later stages report it
# (`dispatch`: the ATen ops it runs as, recorded at lift time, which the verifier lets the module call;
# `item`: which of its outputs, for an op that returns several: -1 where it returns one tensor)
_def("opaque", "opaque", (0, None), target=R, args=R, kwargs=(), dispatch=(), item=-1)


def opdef(name: str) -> OpDef:
    try:
        return OPS[name]
    except KeyError:
        raise KeyError(f"unknown IR op {name!r}") from None


def freeze(v: Any) -> Any:
    """Attributes are immutable and hashable: lists become tuples, dtypes their IR names."""
    if isinstance(v, (list, tuple)):
        return tuple(freeze(x) for x in v)
    if isinstance(v, torch.dtype):
        return dtype_of(v)
    if isinstance(v, bool) or v is None or isinstance(v, (int, float, str)):
        return v
    if isinstance(v, torch.SymInt):  # a run-time size (--dynamic)
        return v if keeping_symints() else size(v)
    raise TypeError(f"attribute value {v!r} ({type(v).__name__}) is not representable in the IR")


def normalize_attrs(op: str, attrs: dict[str, Any]) -> dict[str, Any]:
    d = opdef(op)
    unknown = [k for k in attrs if k not in d.attrs]
    if unknown:
        raise ValueError(f"op {op!r} has no attribute {unknown[0]!r}")
    missing = [k for k in d.required() if k not in attrs]
    if missing:
        raise ValueError(f"op {op!r} needs attribute(s) {', '.join(missing)}")
    # schema order, so the text form is canonical whatever order a caller used
    return {k: freeze(attrs[k]) if k in attrs else v for k, v in d.attrs.items()}
