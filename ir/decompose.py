"""Composite ops defined by their decomposition into primitives.

Each decomposition is written once against an `Emitter`, so the same function both *evaluates* a
composite in the interpreter (EagerEmitter over tensors) and *rewrites* it into primitive nodes in
a graph (GraphEmitter), which the `decompose` pass uses.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable, Sequence
from typing import Any, Generic, Protocol, TypeVar

import torch

from .graph import Graph, Node
from .interp import COMPOSITES, eval_op
from .ops import normalize_attrs
from .sym import is_dynamic
from .types import DTYPES, FLOAT_DTYPES, dtype_of

V = TypeVar("V")


class Emitter(Protocol[V]):
    def emit(self, op: str, args: Sequence[V | None], **attrs: Any) -> V: ...
    def shape(self, v: V) -> tuple[int, ...]: ...
    def dtype(self, v: V) -> str: ...


class EagerEmitter:
    def __init__(self, ctx: Any) -> None:
        self.ctx = ctx

    def emit(self, op: str, args: Sequence[torch.Tensor | None], **attrs: Any) -> torch.Tensor:
        return eval_op(op, list(args), normalize_attrs(op, attrs), self.ctx)

    def shape(self, v: torch.Tensor) -> tuple[int, ...]:
        return tuple(v.shape)

    def dtype(self, v: torch.Tensor) -> str:
        return dtype_of(v.dtype)


class GraphEmitter(Generic[V]):
    def __init__(self, graph: Graph, hint: str) -> None:
        self.graph, self.hint = graph, hint
        self.created: list[Node] = []

    def emit(self, op: str, args: Sequence[Node | None], **attrs: Any) -> Node:
        n = self.graph.add(op, list(args), attrs, name=f"{self.hint}_{op}")
        self.created.append(n)
        return n

    def shape(self, v: Node) -> tuple[int, ...]:
        return v.shape

    def dtype(self, v: Node) -> str:
        return v.dtype


Decomp = Callable[[Emitter, list, dict[str, Any]], Any]
DECOMPOSITIONS: dict[str, Decomp] = {}


def decomposition(name: str) -> Callable[[Decomp], Decomp]:
    def reg(fn: Decomp) -> Decomp:
        DECOMPOSITIONS[name] = fn
        return fn
    return reg


# --- helpers
def _c(e: Emitter, value: float, like: Any) -> Any:
    """A scalar constant of `like`'s float dtype (promotes like a Python number)."""
    dt = e.dtype(like)
    value = value if is_dynamic(value) else float(value)  # a run-time count (--dynamic) stays symbolic
    return e.emit("scalar", [], value=value, dtype=dt if dt in FLOAT_DTYPES else "f32")


def _ci(e: Emitter, value: int) -> Any:
    return e.emit("scalar", [], value=int(value), dtype="i64")


def _bshape(rank: int, c: int) -> list[int]:
    """[1, C, 1, ...]: a per-channel vector broadcast against an N, C, ... tensor."""
    return [1, c] + [1] * (rank - 2)


def _normalize(e: Emitter, x: Any, dims: list[int], eps: float) -> Any:
    mean = e.emit("mean", [x], dims=dims, keepdim=True)
    var = e.emit("var", [x], dims=dims, keepdim=True, correction=0.0)
    inv = e.emit("rsqrt", [e.emit("add", [var, _c(e, eps, x)])])
    return e.emit("mul", [e.emit("sub", [x, mean]), inv])


def _in_f32(e: Emitter, x: Any, norm: Callable[[Any, Callable[[Any], Any]], Any]) -> Any:
    """A normalisation of a 16-bit `x` as torch's kernels compute it: statistics, normalised value and
    affine in fp32, rounded once at the end. `norm(x, up)` is given `x` in fp32 and `up` to bring its
    other operands (weights, running statistics) to fp32."""
    dt = e.dtype(x)
    if dt not in ("f16", "bf16"):
        return norm(x, lambda v: v)

    def up(v: Any) -> Any:
        return v if v is None or e.dtype(v) == "f32" else e.emit("cast", [v], dtype="f32")

    return e.emit("cast", [norm(up(x), up)], dtype=dt)


def _affine(e: Emitter, y: Any, w: Any, b: Any, shape: list[int] | None) -> Any:
    if w is not None:
        y = e.emit("mul", [y, w if shape is None else e.emit("reshape", [w], shape=shape)])
    if b is not None:
        y = e.emit("add", [y, b if shape is None else e.emit("reshape", [b], shape=shape)])
    return y


def _reduce(e: Emitter, x: Any, reduction: str) -> Any:
    if reduction == "none":
        return x
    if reduction in ("mean", "sum"):
        return e.emit(reduction, [x], dims=None, keepdim=False)
    raise ValueError(f"unknown reduction {reduction!r}")


def _squeeze_dims(shape: tuple[int, ...], dims: list[int]) -> list[int]:
    return [s for i, s in enumerate(shape) if i not in dims]


# --- normalisations and softmax family
@decomposition("softmax")
def _softmax(e, a, at):  # in fp32 for a 16-bit x, rounded once, as torch's kernels
    d = at["dim"]

    def norm(x: Any, up: Callable[[Any], Any]) -> Any:
        z = e.emit("sub", [x, e.emit("amax", [x], dims=[d], keepdim=True)])
        ex = e.emit("exp", [z])
        return e.emit("div", [ex, e.emit("sum", [ex], dims=[d], keepdim=True)])

    return _in_f32(e, a[0], norm)


@decomposition("log_softmax")
def _log_softmax(e, a, at):
    d = at["dim"]

    def norm(x: Any, up: Callable[[Any], Any]) -> Any:
        z = e.emit("sub", [x, e.emit("amax", [x], dims=[d], keepdim=True)])
        lse = e.emit("log", [e.emit("sum", [e.emit("exp", [z])], dims=[d], keepdim=True)])
        return e.emit("sub", [z, lse])

    return _in_f32(e, a[0], norm)


@decomposition("logsumexp")
def _logsumexp(e, a, at):  # torch's is composite too: a 16-bit x rounds at each step, as here
    x = a[0]
    rank = len(e.shape(x))
    dims = sorted(d % max(rank, 1) for d in at["dims"])
    m = e.emit("amax", [x], dims=dims, keepdim=True)
    # an infinite max would turn x - m into NaN: shift by zero there instead (as torch does)
    inf = e.emit("eq", [e.emit("abs", [m]), _c(e, math.inf, x)])
    m = e.emit("where", [inf, _c(e, 0.0, x), m])
    s = e.emit("sum", [e.emit("exp", [e.emit("sub", [x, m])])], dims=dims, keepdim=True)
    out = e.emit("add", [e.emit("log", [s]), m])
    if not at["keepdim"]:
        out = e.emit("reshape", [out], shape=_squeeze_dims(e.shape(x), dims))
    return out


@decomposition("batch_norm")
def _batch_norm(e, a, at):
    x, w, b, rm, rv = a
    shape = e.shape(x)
    bs = _bshape(len(shape), shape[1])

    def norm(x: Any, up: Callable[[Any], Any]) -> Any:
        if at["training"] or rm is None:
            y = _normalize(e, x, [0] + list(range(2, len(shape))), at["eps"])
        else:
            inv = e.emit("rsqrt", [e.emit("add", [e.emit("reshape", [up(rv)], shape=bs), _c(e, at["eps"], x)])])
            y = e.emit("mul", [e.emit("sub", [x, e.emit("reshape", [up(rm)], shape=bs)]), inv])
        return _affine(e, y, up(w), up(b), bs)

    return _in_f32(e, x, norm)


@decomposition("instance_norm")
def _instance_norm(e, a, at):
    x, w, b = a
    shape = e.shape(x)
    return _in_f32(e, x, lambda x, up: _affine(e, _normalize(e, x, list(range(2, len(shape))), at["eps"]), up(w),
                                               up(b), _bshape(len(shape), shape[1])))


@decomposition("group_norm")
def _group_norm(e, a, at):
    x, w, b = a
    shape = e.shape(x)
    n, c, g = shape[0], shape[1], at["groups"]
    # grouped as [N, G, C/G, spatial]: the per-channel affine stays a strided read in the group's coordinates
    per = c // g if g else 0
    rest = math.prod(shape[2:])

    def norm(x: Any, up: Callable[[Any], Any]) -> Any:
        y = _normalize(e, e.emit("reshape", [x], shape=[n, g, per, rest]), [2, 3], at["eps"])
        return _affine(e, e.emit("reshape", [y], shape=list(shape)), up(w), up(b), _bshape(len(shape), c))

    return _in_f32(e, x, norm)


@decomposition("layer_norm")
def _layer_norm(e, a, at):
    x, w, b = a
    rank, k = len(e.shape(x)), len(at["normalized_shape"])
    return _in_f32(e, x, lambda x, up: _affine(e, _normalize(e, x, list(range(rank - k, rank)), at["eps"]), up(w),
                                               up(b), None))


@decomposition("rms_norm")
def _rms_norm(e, a, at):
    x, w = a
    rank, k = len(e.shape(x)), len(at["normalized_shape"])
    eps = at["eps"] if at["eps"] is not None else torch.finfo(DTYPES[e.dtype(x)]).eps

    def norm(x: Any, up: Callable[[Any], Any]) -> Any:
        ms = e.emit("mean", [e.emit("mul", [x, x])], dims=list(range(rank - k, rank)), keepdim=True)
        return _affine(e, e.emit("mul", [x, e.emit("rsqrt", [e.emit("add", [ms, _c(e, eps, x)])])]), up(w), None, None)

    return _in_f32(e, x, norm)


# --- attention
@decomposition("attention")
def _attention(e, a, at):
    q, k, v = a[:3]
    mask = a[3] if len(a) > 3 else None
    qs, ks = e.shape(q), e.shape(k)
    scale = at["scale"] if at["scale"] is not None else 1.0 / math.sqrt(qs[-1])
    perm = list(range(len(ks)))
    perm[-1], perm[-2] = perm[-2], perm[-1]
    s = e.emit("mul", [e.emit("matmul", [q, e.emit("permute", [k], dims=perm)]), _c(e, scale, q)])
    neg_inf = _c(e, -math.inf, q)
    if at["causal"]:
        keep = e.emit("tril", [e.emit("full", [], shape=[qs[-2], ks[-2]], value=True, dtype="bool")])
        s = e.emit("where", [keep, s, neg_inf])
    if mask is not None:
        s = (e.emit("where", [mask, s, neg_inf]) if e.dtype(mask) == "bool"
             else e.emit("add", [s, mask]))
    p = e.emit("softmax", [s], dim=-1)
    if mask is not None and not at.get("nan_rows"):  # torch's attention answers 0 for a query whose every
        # key is masked (softmax: 0 / 0); a written-out softmax (`passes.attention`) NaN
        dead = e.emit("eq", [e.emit("amax", [s], dims=[-1], keepdim=True), neg_inf])
        p = e.emit("where", [dead, _c(e, 0.0, q), p])
    return e.emit("matmul", [p, v])


@decomposition("cosine_similarity")
def _cosine(e, a, at):
    x1, x2, d, eps = a[0], a[1], at["dim"], at["eps"]

    def unit(x: Any) -> Any:
        n = e.emit("norm", [x], dims=[d], keepdim=True, ord=2.0)
        return e.emit("div", [x, e.emit("clamp", [n], min=eps)])

    return e.emit("sum", [e.emit("mul", [unit(x1), unit(x2)])], dims=[d], keepdim=False)


# --- losses
@decomposition("mse_loss")
def _mse(e, a, at):
    d = e.emit("sub", [a[0], a[1]])
    return _reduce(e, e.emit("mul", [d, d]), at["reduction"])


def _huber_like(e: Emitter, x: Any, y: Any, cut: float, quad_scale: float, lin_scale: float,
                reduction: str) -> Any:
    """where(|x-y| < cut, quad_scale*z^2, lin_scale*(z - cut/2))."""
    z = e.emit("abs", [e.emit("sub", [x, y])])
    quad = e.emit("mul", [e.emit("mul", [z, z]), _c(e, quad_scale, x)])
    lin = e.emit("mul", [e.emit("sub", [z, _c(e, 0.5 * cut, x)]), _c(e, lin_scale, x)])
    return _reduce(e, e.emit("where", [e.emit("lt", [z, _c(e, cut, x)]), quad, lin]), reduction)


@decomposition("huber_loss")
def _huber(e, a, at):
    return _huber_like(e, a[0], a[1], at["delta"], 0.5, at["delta"], at["reduction"])


@decomposition("smooth_l1_loss")
def _smooth_l1(e, a, at):
    beta = at["beta"]
    if beta == 0.0:
        return _reduce(e, e.emit("abs", [e.emit("sub", [a[0], a[1]])]), at["reduction"])
    return _huber_like(e, a[0], a[1], beta, 0.5 / beta, 1.0, at["reduction"])


@decomposition("kl_div")
def _kl_div(e, a, at):
    x, t = a
    if at["log_target"]:
        pointwise = e.emit("mul", [e.emit("exp", [t]), e.emit("sub", [t, x])])
    else:  # xlogy(t, t) - t * x, with 0 * log 0 = 0
        tlogt = e.emit("where", [e.emit("eq", [t, _c(e, 0.0, t)]), _c(e, 0.0, t),
                                 e.emit("mul", [t, e.emit("log", [t])])])
        pointwise = e.emit("sub", [tlogt, e.emit("mul", [t, x])])
    return _reduce(e, pointwise, at["reduction"])


@decomposition("cross_entropy")
def _cross_entropy(e, a, at):
    x, t = a
    cdim = 0 if len(e.shape(x)) == 1 else 1
    c = e.shape(x)[cdim]
    eps = at["label_smoothing"]
    logp = e.emit("log_softmax", [x], dim=cdim)
    if e.dtype(t) in FLOAT_DTYPES:  # class probabilities
        if eps > 0:
            t = e.emit("add", [e.emit("mul", [t, _c(e, 1.0 - eps, t)]), _c(e, eps / c, t)])
        loss = e.emit("neg", [e.emit("sum", [e.emit("mul", [logp, t])], dims=[cdim], keepdim=False)])
        if at["reduction"] == "mean":
            n = math.prod(e.shape(loss)) if e.shape(loss) else 1
            return e.emit("div", [e.emit("sum", [loss], dims=None, keepdim=False), _c(e, n, x)])
        return _reduce(e, loss, at["reduction"])
    valid = e.emit("ne", [t, _ci(e, at["ignore_index"])])
    safe = e.emit("where", [valid, t, _ci(e, 0)])
    tshape = list(e.shape(t))
    idx = e.emit("reshape", [safe], shape=tshape[:cdim] + [1] + tshape[cdim:])
    nll = e.emit("neg", [e.emit("reshape", [e.emit("gather", [logp, idx], dim=cdim)], shape=tshape)])
    if eps > 0:
        smooth = e.emit("neg", [e.emit("sum", [logp], dims=[cdim], keepdim=False)])
        nll = e.emit("add", [e.emit("mul", [nll, _c(e, 1.0 - eps, x)]),
                             e.emit("mul", [smooth, _c(e, eps / c, x)])])
    nll = e.emit("where", [valid, nll, _c(e, 0.0, x)])
    if at["reduction"] == "mean":
        count = e.emit("sum", [e.emit("cast", [valid], dtype=e.dtype(x))], dims=None, keepdim=False)
        return e.emit("div", [e.emit("sum", [nll], dims=None, keepdim=False), count])
    return _reduce(e, nll, at["reduction"])


@decomposition("triplet_margin_loss")
def _triplet(e, a, at):
    anc, pos, neg = a

    def dist(u: Any, v: Any) -> Any:
        diff = e.emit("add", [e.emit("sub", [u, v]), _c(e, at["eps"], u)])
        return e.emit("norm", [diff], dims=[-1], keepdim=False, ord=at["p"])

    d_ap, d_an = dist(anc, pos), dist(anc, neg)
    if at["swap"]:
        d_an = e.emit("minimum", [d_an, dist(pos, neg)])
    loss = e.emit("add", [e.emit("sub", [d_ap, d_an]), _c(e, at["margin"], anc)])
    return _reduce(e, e.emit("clamp", [loss], min=0.0), at["reduction"])


@decomposition("hinge_embedding_loss")
def _hinge_embedding(e, a, at):
    x, y = a
    zero = _c(e, 0.0, x)
    margin = e.emit("clamp", [e.emit("sub", [_c(e, at["margin"], x), x])], min=0.0)
    out_margin = e.emit("where", [e.emit("ne", [y, _c(e, 1.0, y)]), margin, zero])
    out_self = e.emit("where", [e.emit("ne", [y, _c(e, -1.0, y)]), x, zero])
    return _reduce(e, e.emit("add", [out_margin, out_self]), at["reduction"])


def decomposition_for(op: str) -> Decomp:
    """`op`'s decomposition; the recurrent layers' is defined beside their tracing (`ir.recurrence`)."""
    if op not in DECOMPOSITIONS:
        importlib.import_module("ir.recurrence")
    return DECOMPOSITIONS[op]


def _eager(op: str) -> Callable[[list[Any], dict[str, Any], Any], torch.Tensor]:
    return lambda args, attrs, ctx: DECOMPOSITIONS[op](EagerEmitter(ctx), list(args), attrs)


# the interpreter evaluates a composite through its decomposition (its meaning is defined once)
COMPOSITES.update({op: _eager(op) for op in DECOMPOSITIONS})
