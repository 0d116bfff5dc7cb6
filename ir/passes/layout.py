"""Operand layouts and views.

K-major B for split-precision GEMMs (`kmajor`): an fp32 `matmul(a, b)` whose B is row-major [K, N] becomes
`linear(a, bT)` with B transposed once into a K-major copy ([N, K]). Tensor cores take
32-bit operands K-major only (there is no transposing shared-memory load for them as there is for 16-bit
ones), so a 3xTF32 GEMM over an N-major B is held back by its B tiles; the copy costs one pass over B. A B
that is itself a transpose (`x.T`) is read through, with no copy. A K that leaves rows unaligned (K = 2949) is
padded with zeros in both operands (A copied once too): the tiles then load whole vectors. GEMMs with few rows
are left alone (they stream B once, and a copy would triple that traffic), as are shallow ones (K or N small:
bound by writing the output, where the ranking picks an FMA tile that wants B row-major).

Channels-last convolutions (`channelslast`): see `ChannelsLast`.

Views per use (`views`): see `ViewsPerUse`."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

from ..graph import Graph, Node
from .base import Firing, P, RewritePass, Rewriter, Rule, Trace, X, register
from .fusion import fusion_kind
from .library import LIBRARY_MARK
from .strides import VIEW_OPS

MIN_ROWS = 256  # below this a GEMM is bound by reading B, which the copy would read twice more
MIN_DEPTH = 128  # K and N at least this: shallower GEMMs are bound by their output, and an FMA tile
# (what the ranking picks there) reads a K-major B across its rows
K_ALIGN = 16  # K padded (zeros) to a multiple of this in both operands' copies: every row 64-byte aligned


def _kmajor(r: Rewriter, b: dict[str, Node]) -> Node | None:
    mm, a, w = r.root, b["a"], b["b"]
    # a batched B stays N-major (its K-major form measured slower on a bmm); a 3-D A over a 2-D B is one
    # GEMM over all its rows
    if mm.meta.get(LIBRARY_MARK) or mm.type.dtype != "f32" or a.type.rank < 2 or w.type.rank != 2 \
            or math.prod(a.type.shape[:-1]) < MIN_ROWS or min(w.type.shape) < MIN_DEPTH:
        return None
    if w.op == "permute" and w.args[0] is not None and list(w.attrs["dims"]) == [1, 0]:
        wt = w.args[0]  # already K-major underneath: read it as the linear's weight, no copy
    else:
        wt = r.op("permute", [w], dims=[1, 0])
    k = a.type.shape[-1]
    if type(k) is int and k % K_ALIGN:  # rows of K elements off 16-byte boundaries load a word at a time
        pads = [0, -k % K_ALIGN]
        a, wt = r.op("pad", [a], pads=pads), r.op("pad", [wt], pads=pads)
    return r.op("linear", [a, wt])


@register
@dataclass(frozen=True)
class KMajorOperands(RewritePass):
    """fp32 GEMMs over a 2-D B with at least MIN_ROWS rows (of A, however many axes it has), K and N at
    least MIN_DEPTH, as `linear` over a K-major B (see the module text)."""

    name: ClassVar[str] = "kmajor"
    rules: ClassVar[tuple[Rule, ...]] = (Rule("matmul-as-linear", P("matmul", X("a"), X("b")), _kmajor),)


def _to_last(r: Rewriter, b: dict[str, Node]) -> Node | None:
    conv, x = r.root, b["x"]
    rank = x.type.rank
    if conv.attrs["channels_last"] or rank not in (4, 5):  # torch has channels-last formats for 2-D and 3-D
        return None
    xt = r.op("permute", [x], dims=[0, *range(2, rank), 1])
    yt = r.op(conv.op, [xt, *conv.args[1:]], **{**conv.attrs, "channels_last": True})
    return r.op("permute", [yt], dims=[0, rank - 1, *range(1, rank - 1)])


def _sink(r: Rewriter, b: dict[str, Node]) -> Node | None:
    """A pointwise op over channels-first views of channels-last values, as the op on the values viewed
    channels-first after it: the view moves toward the next convolution, whose own transposition then
    cancels it (a norm and activation between two convolutions run channels-last, no transposition)."""
    n = r.root
    rank = n.type.rank
    back = [0, rank - 1, *range(1, rank - 1)]  # channels-last -> channels-first
    views = [a for a in n.args if a is not None and a.op == "permute"]
    if rank not in (4, 5) or not views or any(list(a.attrs["dims"]) != back for a in views) or \
            n.attrs.keys() & {"dim", "dims", "shape", "seed"}:
        return None
    channels = n.type.shape[1]
    if type(channels) is not int:  # a run-time size: no view of a per-channel value to size
        return None
    args: list[Node | None] = []
    for a in n.args:
        if a is None or a.type.rank == 0 or a in views:
            args.append(a.args[0] if a in views else a)  # type: ignore[union-attr]
        elif type(a.type.numel) is int and a.type.numel <= channels:  # a per-channel value (a norm's scale)
            full = a if a.type.rank == rank else \
                r.op("reshape", [a], shape=[1] * (rank - a.type.rank) + list(a.type.shape))
            args.append(r.op("permute", [full], dims=[0, *range(2, rank), 1]))
        else:  # a full tensor stored channels-first (a residual): read transposed where it is used
            return None
    return r.op("permute", [r.op(n.op, args, **n.attrs)], dims=back)


def _pool_last(r: Rewriter, b: dict[str, Node]) -> Node | None:
    """A 2-D max or average pool over the channels-first view of a channels-last value, as a pool of the
    value itself: NHWC pooled over (H, W, C) with a window of 1 along C, the same window torch's 3-D pool
    of an unbatched tensor takes (the view moves behind it, toward the next convolution). Read through
    the view, a pool's neighbouring outputs read positions a channel row apart (on the H200, a bf16
    ResNet's max pool took 314 us over channels-last input, a third of the model's GPU time)."""
    n, v = r.root, b["x"]
    ks = list(n.attrs["kernel"])
    if v.op != "permute" or v.args[0] is None or v.type.rank != 4 or len(ks) != 2 or \
            list(v.attrs["dims"]) != [0, 3, 1, 2]:
        return None
    at = dict(n.attrs, kernel=[*ks, 1], stride=[*(list(n.attrs["stride"]) or ks), 1],
              padding=[*n.attrs["padding"], 0])
    if "dilation" in at:
        at["dilation"] = [*(list(at["dilation"]) or [1, 1]), 1]
    return r.op("permute", [r.op(n.op, [v.args[0]], **at)], dims=[0, 3, 1, 2])


def _reduce_last(r: Rewriter, b: dict[str, Node]) -> Node | None:
    """A sum, mean, max or min over the channels-first view of a channels-last value, as the reduction of the
    value over the same axes (global pooling before a classifier: [N, C] either way). Read through the view,
    the pool before it wrote channels-first, each of its outputs gathering inputs a channel row apart (a
    ConvNet's last max pool: 34 ms of 120)."""
    n, v = r.root, b["x"]
    rank = n.args[0].type.rank if n.args[0] is not None else 0
    dims = n.attrs.get("dims")
    if v.op != "permute" or v.args[0] is None or rank not in (4, 5) or dims is None or \
            list(v.attrs["dims"]) != [0, rank - 1, *range(1, rank - 1)]:
        return None
    perm = list(v.attrs["dims"])
    ds = sorted({d % rank for d in ([dims] if isinstance(dims, int) else dims)})
    kept = [perm[i] for i in range(rank) if i not in ds]
    if not n.attrs["keepdim"] and kept != sorted(kept):  # the result's axes would come out in another order
        return None
    out = r.op(n.op, [v.args[0]], **dict(n.attrs, dims=[perm[d] for d in ds]))
    return r.op("permute", [out], dims=perm) if n.attrs["keepdim"] else out


def _sinkable(n: Node) -> bool:
    return fusion_kind(n) == "pointwise" and n.op not in VIEW_OPS and any(
        a is not None and a.op == "permute" for a in n.args)


@register
@dataclass(frozen=True)
class ChannelsLast(RewritePass):
    """2-D and 3-D convolutions (and transposed ones) over channels-last operands: oneDNN runs a
    channels-first convolution by reordering its input and output around a channels-last (or blocked)
    one on every call; here the transpositions are graph ops, which fusion folds into the generated
    kernels that produce the input and read the output (a convolution's epilogue reads it transposed),
    and pointwise ops and 2-D pools on the output move behind its view back (`_sink`, `_pool_last`) until
    it meets the next convolution's transposition, which cancels it (simplify), or a reduction over it
    takes the channels-last value itself (`_reduce_last`).
    A strategy the tune measures (`--conv channels-last`): it pays where the convolution's own
    saving beats what its transpositions cost."""

    name: ClassVar[str] = "channelslast"
    rules: ClassVar[tuple[Rule, ...]] = (
        Rule("conv-channels-last", P(("conv", "conv_transpose"), X("x"), X("w")), _to_last),
        Rule("conv-channels-last", P(("conv", "conv_transpose"), X("x"), X("w"), X("b")), _to_last),
        Rule("sink-channels-first-view", P(None, where=_sinkable), _sink),
        Rule("pool-channels-last", P(("max_pool", "avg_pool"), X("x")), _pool_last),
        Rule("reduce-channels-last", P(("sum", "mean", "amax", "amin"), X("x")), _reduce_last))


PER_USE = ("pointwise", "movement", "reduction")  # kernels that read a view through their own index


def _slice_chain(v: Node, users: dict[Node, list[Node]], outputs: set[int]) -> list[Node] | None:
    """`v` and the views below it, top first, where they slice any value (a time step of a recurrence's
    input projection, `unbind`'s pieces: a slice, then a reshape dropping its axis) and each view below
    `v` is read by the next alone; None otherwise."""
    chain, n = [v], v
    while n.op in (*VIEW_OPS, "slice") and id(n) not in outputs and n.args and n.args[0] is not None:
        below = n.args[0]
        if below.op not in (*VIEW_OPS, "slice") or len(users[below]) != 1 or id(below) in outputs:
            break
        chain.append(below)
        n = below
    if chain[-1].op not in (*VIEW_OPS, "slice") or not any(m.op == "slice" for m in chain):
        return None
    return chain


def _copy_chain(g: Graph, chain: list[Node], users: dict[Node, list[Node]]) -> Node:
    """A copy of a chain of views (top first), reading the same source (`users` kept up to date);
    returns the copy of the top."""
    below = chain[-1].args[0]
    for m in reversed(chain):
        c = g.add(m.op, [below, *m.args[1:]], dict(m.attrs), type=m.type, name=m.name)
        c.meta.update(m.meta)
        users.setdefault(below, []).append(c)
        below = c
    return below


def _widened(n: Node) -> bool:
    """A 16-bit input or parameter cast to fp32 (a normalisation's statistics in fp32): recomputed in each
    load as cheaply as a view, where a stored copy would write and read back twice its bytes."""
    src = n.args[0] if n.op == "cast" and n.args else None
    return (src is not None and src.op in ("input", "param") and n.type.dtype == "f32"
            and src.type.dtype in ("f16", "bf16"))


@register
@dataclass(frozen=True)
class ViewsPerUse:
    """A view (reshape, expand, permute) of an input or parameter, or a slice of any value (with the
    views over it), read by several kernels: a copy of the view for each pointwise or reduction consumer,
    so each kernel reads the source through its own index and nothing is stored (fusion materialises a
    value used twice: a group norm's reshaped input was copied whole, then read three times; a recurrence's
    input projection was copied one time step at a time). A 16-bit input cast to fp32 is such a view too
    (`_widened`). Other consumers (a GEMM, which reads a view in place or copies it once; a library call)
    share the original."""

    name: ClassVar[str] = "views"

    def run(self, g: Graph, trace: Trace) -> bool:
        users = g.users()
        outputs = {id(o) for o in g.outputs}
        changed = False
        for v in reversed(list(g.nodes)):  # the last view of a chain first: its copies make the next several
            chain = _slice_chain(v, users, outputs)
            src = v.args[0] if v.args else None
            viewed = v.op in VIEW_OPS and src is not None and (src.op in ("input", "param") or _widened(src))
            if chain is None and (not (viewed or _widened(v)) or id(v) in outputs):
                continue
            readers = list({id(u): u for u in users[v]}.values())
            own = [u for u in readers if fusion_kind(u) in PER_USE]
            if len(readers) < 2 or not own:
                continue
            for u in own[1:] if len(own) == len(readers) else own:  # the original serves one, or the rest
                c = _copy_chain(g, chain or [v], users)
                u.args = tuple(c if a is v else a for a in u.args)
                users[v] = [w for w in users[v] if w is not u]
                users[c] = [u]
                trace.record(Firing(self.name, "view-per-use", v.name, f"read by {len(readers)} kernels",
                                    f"%{c.name} for %{u.name}"))
                changed = True
        if changed:
            g.plan = None  # a plan of the graph before this pass no longer describes it
            g.cleanup()  # the copies were appended: back into topological order
        return changed
