"""Transposed convolutions as one convolution per output phase (`tphases`).

A strided transposed convolution scatters each input element into a window of the output: output
position o (per spatial axis, stride s, padding p, dilation 1) takes the kernel taps k = (o + p) mod s +
s*m only. Generated as a gathering implicit GEMM, it reads every tap and masks the (s-1)/s that miss: a
4x4 kernel at stride 2 does four times the work. Here the outputs of each residue o mod s (a phase) are a
plain stride-1 convolution of the input with that phase's taps, reversed (`_phase`); the s^d phases are
then interleaved. Each phase has about 1/s^d of the taps and of the outputs: the whole does the
transposed convolution's own work once."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import ClassVar

from ..graph import Node
from .base import P, RewritePass, Rewriter, Rule, X, register


def _axis_plan(size: int, k: int, s: int, p: int, out: int, rho: int) -> tuple[int, int, int, int] | None:
    """For the outputs o = rho + s*t (t < ceil(out / s)) along one axis: the tap phase, the number of
    taps M, and the input's padding (left, right; negative: that much cropped) so that a stride-1
    convolution with the phase's taps reversed gives them in order. None where the phase has no tap or
    its window misses the input."""
    phi = (rho + p) % s
    taps = -(-(k - phi) // s)
    if taps <= 0:
        return None
    c = (rho + p - phi) // s  # output t reads input t + c - m for tap phi + s*m
    n = -(-out // s)
    left = taps - 1 - c
    right = n + taps - 1 - size - left
    if size + min(0, left) + min(0, right) <= 0:  # cropped to nothing: the phase reads only padding
        return None
    return phi, taps, left, right


def _phases(r: Rewriter, b: dict[str, Node]) -> Node | None:
    ct, x, w = r.root, b["x"], b["w"]
    at = ct.attrs
    rank = len(at["stride"])
    if at["groups"] != 1 or any(d != 1 for d in at["dilation"]) or at["channels_last"] or \
            all(s == 1 for s in at["stride"]) or x.type.rank != rank + 2:
        return None
    sizes, kernel, out = x.type.shape[2:], w.type.shape[2:], ct.type.shape[2:]
    if not all(type(v) is int for v in (*sizes, *out)):  # a run-time size (an int subclass): left gathering
        return None
    plans = []
    for rhos in itertools.product(*(range(s) for s in at["stride"])):
        axes = [_axis_plan(sizes[d], kernel[d], at["stride"][d], at["padding"][d], out[d], rhos[d])
                for d in range(rank)]
        if any(a is None for a in axes):
            return None
        plans.append((rhos, axes))
    wt = r.op("permute", [w], dims=[1, 0, *range(2, rank + 2)])  # (Cout, Cin, *kernel)
    bias = ct.args[2] if len(ct.args) > 2 else None
    ys = {rhos: _phase(r, x, wt, bias, axes) for rhos, axes in plans}  # type: ignore[arg-type]
    return _interleave(r, ys, at["stride"], out)


def _phase(r: Rewriter, x: Node, wt: Node, bias: Node | None, axes: list[tuple[int, int, int, int]]) -> Node:
    """One phase: its taps of the weight, reversed, over the input cropped or padded to its window."""
    rank = len(axes)
    wp, xp = wt, x
    for d, (phi, taps, left, right) in enumerate(axes):
        dim = d + 2
        wp = r.op("slice", [wp], dim=dim, start=phi, end=phi + (taps - 1) * r.root.attrs["stride"][d] + 1,
                  step=r.root.attrs["stride"][d])
        size = xp.type.shape[dim]
        lo, hi = max(0, -left), size - max(0, -right)
        if lo or hi < size:
            xp = r.op("slice", [xp], dim=dim, start=lo, end=hi, step=1)
    wp = r.op("flip", [wp], dims=list(range(2, rank + 2)))
    pads = []
    for _phi, _taps, left, right in reversed(axes):  # F.pad's order: the last axis first
        pads += [max(0, left), max(0, right)]
    if any(pads):
        xp = r.op("pad", [xp], pads=pads)
    zeros = [0] * rank
    return r.op("conv", [xp, wp] + ([bias] if bias is not None else []), stride=[1] * rank, padding=zeros,
                dilation=[1] * rank)


def _interleave(r: Rewriter, ys: dict[tuple[int, ...], Node], stride: tuple[int, ...], out: tuple[int, ...]) -> Node:
    """out[..., rho + s*t, ...] = ys[rho][..., t, ...] per axis, cut to the output's size."""
    rank = len(stride)
    def join(prefix: tuple[int, ...]) -> Node:
        d = len(prefix)
        if d == rank:
            return ys[prefix]
        parts = [join((*prefix, rho)) for rho in range(stride[d])]
        shape = list(parts[0].type.shape)
        axis = 3 + d  # after this axis's t (the deeper axes already hold their t, rho pairs after it)
        parts = [r.op("reshape", [p], shape=shape[:axis] + [1] + shape[axis:]) for p in parts]
        return r.op("concat", parts, dim=axis)

    y = join(())
    shape = list(y.type.shape)
    full = shape[:2] + [shape[2 + 2 * d] * shape[3 + 2 * d] for d in range(rank)]
    y = r.op("reshape", [y], shape=full)
    for d in range(rank):
        if full[2 + d] != out[d]:
            y = r.op("slice", [y], dim=2 + d, start=0, end=out[d], step=1)
    return y


@register
@dataclass(frozen=True)
class TransposedPhases(RewritePass):
    """Strided transposed convolutions (ungrouped, undilated) as one stride-1 convolution per output phase,
    interleaved (see the module text); for plans that generate their convolutions."""

    name: ClassVar[str] = "tphases"
    rules: ClassVar[tuple[Rule, ...]] = (
        Rule("transposed-conv-phases", P("conv_transpose", X("x"), X("w")), _phases),
        Rule("transposed-conv-phases", P("conv_transpose", X("x"), X("w"), X("b")), _phases))

