"""Algebraic simplification rules, each a (pattern, rewrite) pair that keeps the value."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

from ..graph import Graph, Node
from .attention import WRITTEN_ATTENTION
from .base import P, RewritePass, Rewriter, Rule, Trace, X, register
from .gemmsum import annotate_sums, gemm_over_sum


def _users(n: Node) -> int:
    return n.meta.get("_users", 2)


def reduced_axes(n: Node) -> list[int]:
    """The axes a reduction node reduces, sorted and non-negative (all of them where `dims` is None)."""
    rank = n.args[0].type.rank  # type: ignore[union-attr]
    dims = n.attrs["dims"]
    return list(range(rank)) if dims is None else sorted(d % max(rank, 1) for d in dims)


def _finish(r: Rewriter, y: Node) -> Node:
    """Reshape `y` to the replaced node's shape when only size-1 axes differ."""
    return y if list(y.shape) == list(r.root.shape) else r.op("reshape", [y], shape=list(r.root.shape))


# --- a reduction over a contraction's free axis moves in front of it (it is linear)
def _sum_of_linear(r: Rewriter, b: dict[str, Node]) -> Node | None:
    red, lin = r.root, b["lin"]
    x, w = lin.args[0], lin.args[1]
    if reduced_axes(red) != [lin.type.rank - 1] or w is None or x is None or w.type.rank != 2:
        return None
    op = red.op  # sum or mean: both are linear, so they commute with x @ W.T + b
    ws = r.op(op, [w], dims=[0], keepdim=True)
    args = [x, ws]
    if len(lin.args) > 2 and lin.args[2] is not None:
        args.append(r.op(op, [lin.args[2]], dims=[0], keepdim=True))
    return _finish(r, r.op("linear", args))


def _sum_of_matmul(r: Rewriter, b: dict[str, Node]) -> Node | None:
    red, mm = r.root, b["mm"]
    x, w = mm.args
    if w is None or x is None or w.type.rank != 2 or x.type.rank < 2:
        return None
    if reduced_axes(red) != [mm.type.rank - 1]:
        return None
    return _finish(r, r.op("matmul", [x, r.op(red.op, [w], dims=[1], keepdim=True)]))


def _sum_of_conv(r: Rewriter, b: dict[str, Node]) -> Node | None:
    red, conv = r.root, b["conv"]
    if reduced_axes(red) != [1] or conv.attrs["groups"] != 1:
        return None
    x, w = conv.args[0], conv.args[1]
    args = [x, r.op(red.op, [w], dims=[0], keepdim=True)]
    if len(conv.args) > 2 and conv.args[2] is not None:
        args.append(r.op(red.op, [conv.args[2]], dims=[0], keepdim=True))
    a = conv.attrs
    y = r.op("conv", args, stride=a["stride"], padding=a["padding"], dilation=a["dilation"], groups=1)
    return _finish(r, y)


def _sum_of_full_conv_t(r: Rewriter, b: dict[str, Node]) -> Node | None:
    """A sum or mean over every spatial axis of a transposed convolution of stride 1 without padding: each input
    value meets every tap inside the output, so the sum is the input's spatial sums times the weight's tap sums,
    a [N, C] x [C, O] GEMM (the image is never upsampled; KernelBench's level 2 #42 upsamples 512 x 512)."""
    red, ct = r.root, b["ct"]
    a, x, w = ct.attrs, ct.args[0], ct.args[1]
    rank = ct.type.rank
    spatial = list(range(2, rank))
    if (x is None or w is None or reduced_axes(red) != spatial or a["groups"] != 1 or a.get("channels_last")
            or any(v != 1 for v in a["stride"]) or any(a["padding"]) or any(a["output_padding"])
            or not all(isinstance(d, int) for d in ct.shape)):
        return None
    y = r.op("matmul", [r.op("sum", [x], dims=spatial, keepdim=False), r.op("sum", [w], dims=spatial, keepdim=False)])
    positions = math.prod(ct.shape[2:])
    if red.op == "mean":
        y = r.op("div", [y, r.scalar(float(positions), ct.dtype)])
    if len(ct.args) > 2 and ct.args[2] is not None:
        bias = ct.args[2]
        y = r.op("add", [y, bias if red.op == "mean" else r.op("mul", [bias, r.scalar(float(positions), ct.dtype)])])
    return _finish(r, y)


# --- reductions and softmax-like ops over axes of size 1
def _size1(n: Node, axes: list[int]) -> bool:
    shape = n.args[0].shape  # type: ignore[union-attr]
    return bool(axes) and all(shape[a] == 1 for a in axes)


def _trivial_reduction(r: Rewriter, b: dict[str, Node]) -> Node | None:
    n = r.root
    if n.op in ("var", "std", "norm") or not _size1(n, reduced_axes(n)):
        return None
    return _finish(r, b["x"])


def _softmax_size1(r: Rewriter, b: dict[str, Node]) -> Node | None:
    n = r.root
    if b["x"].shape[n.attrs["dim"]] != 1:
        return None
    value = 1.0 if n.op == "softmax" else 0.0
    return r.op("full", [], shape=list(n.shape), value=value, dtype=n.dtype)


def _logsumexp_size1(r: Rewriter, b: dict[str, Node]) -> Node | None:
    n = r.root
    rank = b["x"].type.rank
    axes = sorted(d % rank for d in n.attrs["dims"])
    return _finish(r, b["x"]) if _size1(n, axes) else None


# --- pooling to one output and reductions of reductions
def _global_pool(r: Rewriter, b: dict[str, Node]) -> Node | None:
    n, x = r.root, b["x"]
    k = len(n.attrs["output_size"])
    if any(s != 1 for s in n.attrs["output_size"]):
        return None
    return r.op("mean", [x], dims=list(range(x.type.rank - k, x.type.rank)), keepdim=True)


def _full_window_avg_pool(r: Rewriter, b: dict[str, Node]) -> Node | None:
    n, x = r.root, b["x"]
    k = len(n.attrs["kernel"])
    spatial = list(x.shape[-k:])
    a = n.attrs
    if list(a["kernel"]) != spatial or any(a["padding"]) or a["divisor_override"] is not None:
        return None
    return r.op("mean", [x], dims=list(range(x.type.rank - k, x.type.rank)), keepdim=True)


def _reduce_reduce(r: Rewriter, b: dict[str, Node]) -> Node | None:
    outer, inner = r.root, b["inner"]
    if outer.op != inner.op or not inner.attrs["keepdim"]:
        return None
    axes = sorted(set(reduced_axes(inner)) | set(reduced_axes(outer)))
    # a mean of means is the overall mean only because every inner group has the same size
    return _finish(r, r.op(outer.op, [b["x"]], dims=axes, keepdim=True))


# --- identities with constants
def _const_is(value: float):
    return lambda n: n.op in ("scalar", "full") and n.attrs["value"] == value


def _keep_x(r: Rewriter, b: dict[str, Node]) -> Node | None:
    x = b["x"]
    return x if x.type.shape == r.root.type.shape and x.dtype == r.root.dtype else None


def _dropout_off(r: Rewriter, b: dict[str, Node]) -> Node | None:
    a = r.root.attrs
    return b["x"] if (not a["training"] or a["p"] == 0.0) else None


# --- clamps: relu is clamp(min=0); bounded functions need no clamp
_RANGE = {"sigmoid": (0.0, 1.0), "tanh": (-1.0, 1.0), "relu": (0.0, math.inf), "hardsigmoid": (0.0, 1.0),
          "exp": (0.0, math.inf), "abs": (0.0, math.inf)}


def _bounds(n: Node) -> tuple[float, float]:
    if n.op == "relu":
        return 0.0, math.inf
    lo, hi = n.attrs["min"], n.attrs["max"]
    return (-math.inf if lo is None else lo), (math.inf if hi is None else hi)


def _clamp_node(r: Rewriter, x: Node, lo: float, hi: float) -> Node:
    if lo == 0.0 and hi == math.inf and x.dtype in ("f16", "bf16", "f32", "f64"):
        return r.op("relu", [x])
    return r.op("clamp", [x], min=None if lo == -math.inf else lo, max=None if hi == math.inf else hi)


def _clamp_clamp(r: Rewriter, b: dict[str, Node]) -> Node | None:
    (lo1, hi1), (lo2, hi2) = _bounds(b["inner"]), _bounds(r.root)
    if isinstance(lo1, int) != isinstance(lo2, int) and b["x"].dtype not in ("f16", "bf16", "f32", "f64"):
        return None
    lo, hi = max(lo1, lo2), min(hi1, hi2)
    if lo > hi:  # torch: min > max gives max everywhere; keep it as written
        return None
    return _clamp_node(r, b["x"], lo, hi)


def _clamp_of_bounded(r: Rewriter, b: dict[str, Node]) -> Node | None:
    f = b["f"]
    lo, hi = _bounds(r.root)
    flo, fhi = _RANGE[f.op]
    return f if lo <= flo and hi >= fhi else None


# --- chains of scalar arithmetic
_ADDITIVE, _MULTIPLICATIVE = ("add", "sub"), ("mul", "div")


def _scalar_of(n: Node) -> Node | None:
    return n if n.op == "scalar" else None


def _scalar_chain(r: Rewriter, b: dict[str, Node]) -> Node | None:
    outer, inner = r.root, b["inner"]
    fam = _ADDITIVE if outer.op in _ADDITIVE else _MULTIPLICATIVE
    if inner.op not in fam or len(set(inner.args) & set(outer.args)) or outer.args[0] is not inner:
        return None
    if _scalar_of(outer.args[1]) is None:  # type: ignore[arg-type]
        return None
    # inner = x op a, or a op x for the commutative ops
    if inner.args[1] is not None and inner.args[1].op == "scalar":
        x, a, a_left = inner.args[0], inner.args[1], False
    elif inner.args[0] is not None and inner.args[0].op == "scalar" and inner.op in ("add", "mul"):
        x, a, a_left = inner.args[1], inner.args[0], True
    else:
        return None
    assert x is not None and a is not None
    c1, c2 = a.attrs["value"], outer.args[1].attrs["value"]  # type: ignore[union-attr]
    if isinstance(c1, bool) or isinstance(c2, bool):
        return None
    if fam is _ADDITIVE:
        s1 = c1 if inner.op == "add" or a_left else -c1
        c = s1 + (c2 if outer.op == "add" else -c2)
        op = "add"
    else:
        if inner.op == "div" and outer.op == "div":
            c, op = c1 * c2, "div"
        else:
            e1 = c1 if inner.op == "mul" else 1.0 / c1 if c1 else None
            e2 = c2 if outer.op == "mul" else 1.0 / c2 if c2 else None
            if e1 is None or e2 is None:
                return None
            c, op = e1 * e2, "mul"
    dt = a.attrs["dtype"] if isinstance(c, float) == isinstance(c1, float) else outer.args[1].attrs["dtype"]
    y = r.op(op, [x, r.scalar(c, dt)])
    return y if y.dtype == r.root.dtype else None


# --- slices move toward what they read: through a permute, into one operand of a concat
def _slice_of_permute(r: Rewriter, b: dict[str, Node]) -> Node | None:
    sl, perm = r.root, b["perm"]
    a = sl.attrs
    dims = perm.attrs["dims"]
    inner = r.op("slice", [perm.args[0]], dim=dims[a["dim"] % len(dims)], start=a["start"], end=a["end"],
                 step=a["step"])
    return r.op("permute", [inner], dims=list(dims))


def _slice_of_slice(r: Rewriter, b: dict[str, Node]) -> Node | None:
    outer, inner = r.root.attrs, b["inner"].attrs
    rank = r.root.type.rank
    if outer["step"] != 1 or inner["step"] != 1 or outer["dim"] % rank != inner["dim"] % rank:
        return None
    x = b["inner"].args[0]
    assert x is not None
    d = outer["dim"] % rank
    size, mid = x.shape[d], b["inner"].shape[d]
    start = max(0, min(size, inner["start"] + size if inner["start"] < 0 else inner["start"]))
    lo, hi = (max(0, min(mid, v + mid if v < 0 else v)) for v in (outer["start"], outer["end"]))
    return r.op("slice", [x], dim=d, start=start + lo, end=start + max(lo, hi), step=1)


def _slice_of_concat(r: Rewriter, b: dict[str, Node]) -> Node | None:
    sl, cat = r.root, b["cat"]
    a = sl.attrs
    rank = cat.type.rank
    if a["step"] != 1 or a["dim"] % rank != cat.attrs["dim"] % rank:
        return None
    d = a["dim"] % rank
    size = cat.shape[d]
    start, end = (max(0, min(size, v + size if v < 0 else v)) for v in (a["start"], a["end"]))
    off = 0
    for x in cat.args:
        assert x is not None
        n = x.shape[d]
        if off <= start and end <= off + n:
            if start == off and end == off + n:
                return x
            return r.op("slice", [x], dim=d, start=start - off, end=end - off, step=1)
        off += n
    return None  # the slice spans operands


# --- a reduction reshaped to its keepdim shape (JAX keeps no dims, then broadcasts back) keeps its dims
def _keepdim_reduction(r: Rewriter, b: dict[str, Node]) -> Node | None:
    red = b["red"]
    x = red.args[0]
    if red.attrs.get("keepdim") or x is None:
        return None
    axes = reduced_axes(red)
    if list(r.root.shape) != [1 if i in axes else d for i, d in enumerate(x.shape)]:
        return None
    return r.op(red.op, list(red.args), **dict(red.attrs, keepdim=True))


# --- one weight applied to every slice of a tensor along its first axis (an RNN's input projection
# unrolled over time steps, read as xs[t]): one GEMM over the whole tensor, each step's product a
# slice of it; the same rows are computed, in one call whose GEMM is as tall as all the steps together
def _step_of(lin: Node) -> tuple[Node, int] | None:
    """(xs, t) where `lin`'s input is xs[t] (a unit slice of xs's first axis, that axis dropped)."""
    rs = lin.args[0]
    sl = rs.args[0] if rs is not None and rs.op == "reshape" else None
    if sl is None or sl.op != "slice" or sl.args[0] is None:
        return None
    a, xs = sl.attrs, sl.args[0]
    if a["dim"] % xs.type.rank != 0 or a.get("step", 1) != 1 or a["end"] - a["start"] != 1 or a["start"] < 0:
        return None
    return (xs, a["start"]) if list(rs.shape) == list(xs.shape[1:]) else None


def _gemm_key(lin: Node) -> tuple[int, ...]:
    return tuple(id(a) for a in lin.args[1:])


def _annotate_step_gemms(g: Graph) -> None:
    """Marks on xs the weights (and biases) applied to every one of its slices, each by its own linear."""
    steps: dict[tuple[int, tuple[int, ...]], tuple[Node, set[int]]] = {}
    for n in g.nodes:
        got = _step_of(n) if n.op == "linear" and n.args[0] is not None else None
        if got is not None:
            steps.setdefault((id(got[0]), _gemm_key(n)), (got[0], set()))[1].add(got[1])
    for (_, key), (xs, ts) in steps.items():
        if len(ts) > 1 and ts == set(range(xs.shape[0])):
            xs.meta.setdefault("_step_gemms", set()).add(key)


def _one_gemm_over_steps(r: Rewriter, b: dict[str, Node]) -> Node | None:
    got = _step_of(r.root)
    if got is None or _gemm_key(r.root) not in got[0].meta.get("_step_gemms", ()):
        return None
    xs, t = got
    whole = r.op("linear", [xs, *r.root.args[1:]])  # the same node for every step, once cse has run
    return r.op("reshape", [r.op("slice", [whole], dim=0, start=t, end=t + 1, step=1)], shape=list(r.root.shape))


def _annotate_users(g: Graph) -> None:
    for n, us in g.users().items():
        n.meta["_users"] = len(us) + sum(o is n for o in g.outputs)
    _annotate_step_gemms(g)
    annotate_sums(g)


SIMPLIFY_RULES = (
    Rule("one-gemm-over-steps", P("linear"), _one_gemm_over_steps),
    Rule("one-gemm-over-a-sum", P("add"), lambda r, b: gemm_over_sum(r, _users)),
    Rule("reduce-through-linear", P(("sum", "mean"), P("linear", bind="lin", where=lambda n: _users(n) == 1)),
         _sum_of_linear),
    Rule("reduce-through-matmul", P(("sum", "mean"), P("matmul", bind="mm", where=lambda n: _users(n) == 1)),
         _sum_of_matmul),
    Rule("reduce-through-conv", P(("sum", "mean"), P("conv", bind="conv", where=lambda n: _users(n) == 1)),
         _sum_of_conv),
    Rule("reduce-of-full-conv-transpose", P(("sum", "mean"), P("conv_transpose", bind="ct",
                                                             where=lambda n: _users(n) == 1)), _sum_of_full_conv_t),
    Rule("reduce-over-size1", P(("sum", "mean", "amax", "amin", "prod"), X("x")), _trivial_reduction),
    Rule("softmax-over-size1", P(("softmax", "log_softmax"), X("x")), _softmax_size1),
    Rule("logsumexp-over-size1", P("logsumexp", X("x")), _logsumexp_size1),
    Rule("global-adaptive-pool-is-mean", P("adaptive_avg_pool", X("x")), _global_pool),
    Rule("full-window-avg-pool-is-mean", P("avg_pool", X("x")), _full_window_avg_pool),
    Rule("reduce-of-reduce", P(("sum", "mean", "amax", "amin"), P(("sum", "mean", "amax", "amin"), X("x"),
                                                                   bind="inner")), _reduce_reduce),
    Rule("reduction-keeps-its-dims", P("reshape", P(("sum", "mean", "amax", "amin", "prod", "var", "std"), bind="red",
                                                   where=lambda n: _users(n) == 1)), _keepdim_reduction),
    Rule("mul-by-one", P("mul", X("x"), X("c", _const_is(1))), _keep_x),
    Rule("one-times", P("mul", X("c", _const_is(1)), X("x")), _keep_x),
    Rule("add-zero", P(("add", "sub"), X("x"), X("c", _const_is(0))), _keep_x),
    Rule("zero-plus", P("add", X("c", _const_is(0)), X("x")), _keep_x),
    Rule("div-by-one", P("div", X("x"), X("c", _const_is(1))), _keep_x),
    # max(x, -inf) is x, NaN included (JAX's softmax takes the row maximum against an initial -inf)
    Rule("max-with-minus-inf", P("maximum", X("c", _const_is(-math.inf)), X("x")), _keep_x),
    Rule("pow-one", P("pow", X("x"), X("c", _const_is(1))), _keep_x),
    Rule("dropout-off", P("dropout", X("x")), _dropout_off),
    Rule("clamp-of-clamp", P(("clamp", "relu"), P(("clamp", "relu"), X("x"), bind="inner")), _clamp_clamp),
    Rule("clamp-of-bounded", P(("clamp", "relu"), P(tuple(_RANGE), bind="f")), _clamp_of_bounded),
    Rule("slice-through-permute", P("slice", P("permute", bind="perm", where=lambda n: _users(n) == 1)),
         _slice_of_permute),
    Rule("slice-of-concat", P("slice", P("concat", bind="cat")), _slice_of_concat),
    Rule("slice-of-slice", P("slice", P("slice", bind="inner")), _slice_of_slice),
    Rule("scalar-chain", P(("add", "sub", "mul", "div"), P(("add", "sub", "mul", "div"), bind="inner"),
                            X("c", lambda n: n.op == "scalar")), _scalar_chain),
    WRITTEN_ATTENTION,
)


@register
@dataclass(frozen=True)
class Simplify(RewritePass):
    """Algebraic rewrites (reductions through contractions, identities, bounded clamps)."""

    name: ClassVar[str] = "algebraic"
    rules: ClassVar[tuple[Rule, ...]] = SIMPLIFY_RULES

    def run(self, g: Graph, trace: Trace) -> bool:
        _annotate_users(g)  # rules that duplicate work check single use
        changed = super().run(g, trace)
        for n in g.nodes:
            n.meta.pop("_users", None)
            n.meta.pop("_step_gemms", None)
            n.meta.pop("_in_sum", None)
        return changed


