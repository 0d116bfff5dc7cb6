"""Split reductions: a reduction over few long rows (fewer rows than the target has parallel units,
e.g. a layer norm over 16 rows of 4M elements, or a sum to a scalar) becomes partial reductions
over equal chunks of each row, then a reduction of the partials. Written one kernel per row, such a
reduction keeps 16 of 132 SMs busy; split, the partials give every unit work and the second stage is
tiny.

Exact in real arithmetic: sums, means (equal chunks), maxima, minima, products and p-norms (p != 0)
compose over chunks; a variance is the chunks' mean population variance plus the population
variance of their means (Chan's parallel formula for equal chunks), then the correction. A 16-bit
value is cast to fp32 first and the result rounded once (a partial stored in bf16 would lose what the
accumulator kept; torch accumulates in fp32 and rounds once); so is a reduction over leading axes into
few columns (`_split_leading`: a bias's gradient). The
reductions it writes carry `meta["split"]`, so row fusion does not merge them back into one kernel
per row.

Split-K (`splitk`) is the same idea for a GEMM with few output tiles and a long K (a 256 x 256 output
over K = 524288 is four 128 x 128 tiles for 132 SMs): the K axis cut into S equal chunks, a batched
GEMM of S partial products (operands read in place through their views), then a sum over the S
partials. fp32/fp64 only, like the reductions (the partials keep the accumulator's precision).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import torch

from ..graph import Graph, Node
from .base import P, RewritePass, Rewriter, Rule, Trace, X, register
from .library import LIBRARY_MARK
from .simplify import reduced_axes

SPLITTABLE = ("sum", "mean", "amax", "amin", "prod", "norm", "var", "std")
WAVES = 4  # partial rows per parallel unit: enough groups that the last wave's tail is small
MIN_CHUNK = 4096  # elements a partial reduces at least: below that the second stage costs more than it saves


def _trailing(n: Node) -> int | None:
    """How many trailing axes `n` reduces, None where its axes are not the trailing ones."""
    x = n.args[0]
    assert x is not None
    axes = reduced_axes(n)
    if not axes or axes != list(range(x.type.rank - len(axes), x.type.rank)):
        return None
    return len(axes)


def chunks(rows: int, length: int, units: int, min_length: int, max_chunk: int = 0) -> int:
    """How many chunks each row is split into (1: not split): the fewest, a power of two dividing the
    row, that give every unit WAVES partial rows, each chunk at least MIN_CHUNK long and, where
    `max_chunk` is set, at most that long if it can be (a chunk a core's cache keeps: a variance's second
    pass over its chunk, after the chunk's mean, reads the cache, not memory)."""
    if units <= 0 or rows >= units or length < min_length:
        return 1
    s = 2
    while (rows * s < WAVES * units or max_chunk and length // s > max_chunk) and length % (2 * s) == 0 and \
            length // (2 * s) >= MIN_CHUNK:
        s *= 2
    return s if length % s == 0 and length // s >= MIN_CHUNK else 1


def _split(units: int, min_length: int, chunk_bytes: int):
    # partials and their reductions shared between reductions of the same value (a layer norm's mean
    # and variance both take the chunks' means); the `views` pass gives each partial its own reshape
    memo: dict[tuple[object, ...], Node] = {}

    def rewrite(r: Rewriter, b: dict[str, Node]) -> Node | None:
        red, x = r.root, b["x"]
        if red.meta.get("split") or red.meta.get(LIBRARY_MARK) or red.attrs.get("ord") == 0:
            return None
        wide = x.type.dtype in ("f16", "bf16")
        k = _trailing(red)
        if k is None or x.type.dtype not in ("f32", "f64") and not wide:
            return _split_leading(r, red, x, units, min_length)
        lead = list(x.type.shape[:x.type.rank - k])
        length = math.prod(x.type.shape[x.type.rank - k:])
        itemsize = {"f64": 8, "f32": 4}.get(x.type.dtype, 2)
        s = chunks(math.prod(lead), length, units, min_length, chunk_bytes // itemsize)
        if s == 1:
            return None

        def stage(op: str, v: Node, **attrs: object) -> Node:
            key = (op, id(v), s, tuple(sorted(attrs.items())))
            if key not in memo:
                if v is x and (id(x), s) not in memo:
                    memo[(id(x), s)] = r.op("reshape", [x], shape=[*lead, s, length // s])
                src = memo[(id(x), s)] if v is x else v
                if wide and v is x:
                    # torch accumulates 16-bit reductions in fp32 and rounds once: the partials stay fp32. A
                    # cast of its own for each partial, fused into its load: a shared one would be a kernel
                    # storing the whole input in fp32 for the partials to read back
                    src = r.op("cast", [src], dtype=torch.float32)
                memo[key] = out = r.op(op, [src], dims=[-1], keepdim=False, **attrs)
                out.meta["split"] = True
            return memo[key]

        if red.op in ("var", "std"):
            # the chunks' mean variance plus the variance of their means (equal chunks); the partial
            # mean is the one the partial variance computes inside, so one kernel stores both
            means = stage("mean", x)
            v = r.op("add", [stage("mean", stage("var", x, correction=0.0)), stage("var", means, correction=0.0)])
            c = float(red.attrs["correction"])
            if c:  # the population variance scaled to the asked correction (length - c divisor)
                v = r.op("mul", [v, r.scalar(length / (length - c), x.type.dtype)])
            out = r.op("sqrt", [v]) if red.op == "std" else v
        else:
            extra = {"ord": red.attrs["ord"]} if red.op == "norm" else {}
            out = stage(red.op, stage(red.op, x, **extra), **extra)
        if wide:
            out = r.op("cast", [out], dtype=red.type.torch_dtype)
        return out if list(out.type.shape) == list(red.type.shape) else \
            r.op("reshape", [out], shape=list(red.type.shape))
    return rewrite


COLUMNS = 64  # outputs one program of a reduction over leading axes takes (its tile's contiguous side)
MIN_CHUNK_ROWS = 32  # rows a partial of such a reduction sums at least
LEADING = ("sum", "mean", "amax", "amin")  # exact over chunks, and from a 16-bit input too (below)


def _split_leading(r: Rewriter, red: Node, x: Node, units: int, min_length: int) -> Node | None:
    """A reduction over leading axes into few columns (a bias's or a norm weight's gradient: [tokens, 768]
    summed over the tokens is 12 programs of 64 columns for 132 SMs), as partial reductions over chunks of
    rows, then a reduction of the partials. 16-bit sums and means take their partials in fp32 and round
    once at the end, where torch rounds."""
    axes = reduced_axes(red)
    lead = len(axes)
    if red.op not in LEADING or not axes or axes != list(range(lead)) or lead == x.type.rank \
            or any(type(d) is not int for d in x.type.shape):
        return None
    rows, cols = math.prod(x.type.shape[:lead]), math.prod(x.type.shape[lead:])
    programs = -(-cols // COLUMNS)
    if programs >= units or rows * cols < min_length:
        return None
    s = 1
    while programs * s < WAVES * units and rows % (2 * s) == 0 and rows // (2 * s) >= MIN_CHUNK_ROWS:
        s *= 2
    if s == 1:
        return None
    dtype = x.type.dtype
    wide = dtype in ("f16", "bf16") and red.op in ("sum", "mean")
    src = r.op("cast", [x], dtype=torch.float32) if wide else x
    part = r.op(red.op, [r.op("reshape", [src], shape=[s, rows // s, *x.type.shape[lead:]])], dims=[1],
                keepdim=False)
    out = r.op(red.op, [part], dims=[0], keepdim=False)
    part.meta["split"] = out.meta["split"] = True
    if wide:
        out = r.op("cast", [out], dtype=x.type.torch_dtype)
    return out if list(out.type.shape) == list(red.type.shape) else r.op("reshape", [out], shape=list(red.type.shape))


GEMM_TILE = 128  # the output tile a GPU GEMM template takes at its largest
MIN_K_CHUNK = 2048  # K a partial product spans at least: shorter, its tile's loads are not amortised


def k_splits(m: int, n: int, k: int, units: int) -> int:
    """How many K chunks a [m, k] x [k, n] GEMM is split into (1: not split): the most, a power of two
    dividing K, that keep output tiles x chunks within two waves of `units` and each chunk at least
    MIN_K_CHUNK deep."""
    tiles = -(-m // GEMM_TILE) * -(-n // GEMM_TILE)
    s = 1
    while tiles * s <= units and k % (2 * s) == 0 and k // (2 * s) >= MIN_K_CHUNK:  # doubled: <= 2 waves
        s *= 2
    return s


def _split_k(units: int):
    def rewrite(r: Rewriter, b: dict[str, Node]) -> Node | None:
        mm, a, w = r.root, b["a"], b["b"]
        if mm.meta.get(LIBRARY_MARK) or a.type.rank != 2 or w.type.rank != 2 or mm.type.dtype not in ("f32", "f64"):
            return None
        (m, k), n = a.type.shape, w.type.shape[1]
        if any(type(d) is not int for d in (m, k, n)):  # a run-time size: the chunks would be the traced one's
            return None
        s = k_splits(m, n, k, units)
        if s == 1:
            return None
        a3 = r.op("permute", [r.op("reshape", [a], shape=[m, s, k // s])], dims=[1, 0, 2])
        parts = r.op("matmul", [a3, r.op("reshape", [w], shape=[s, k // s, n])])
        out = r.op("sum", [parts], dims=[0], keepdim=False)
        out.meta["split"] = True
        return out
    return rewrite


@register
@dataclass(frozen=True)
class SplitK(RewritePass):
    """2-D fp32/fp64 GEMMs with few output tiles for `units` (a GPU's SMs; 0: off) and a long K, as a
    batched GEMM over K chunks and a sum of the partials (see the module text)."""

    name: ClassVar[str] = "splitk"
    units: int = 0

    def run(self, g: Graph, trace: Trace) -> bool:
        if self.units <= 0:
            return False
        return self.apply((Rule("split-k", P("matmul", X("a"), X("b")), _split_k(self.units)),), g, trace)


@register
@dataclass(frozen=True)
class SplitReductions(RewritePass):
    """Reductions over fewer rows than `units` (the target's SMs or cores; 0: off) and at least
    `min_length` elements a row, as partial reductions over chunks and a reduction of the partials;
    `chunk_bytes` (0: no bound): chunks no larger where the row allows (a CPU core's cache)."""

    name: ClassVar[str] = "splitreduce"
    units: int = 0
    min_length: int = 1 << 16
    chunk_bytes: int = 0

    def run(self, g: Graph, trace: Trace) -> bool:
        if self.units <= 0:
            return False
        rule = Rule("split-long-rows", P(SPLITTABLE, X("x")), _split(self.units, self.min_length, self.chunk_bytes))
        return self.apply((rule,), g, trace)
