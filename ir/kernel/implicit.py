"""Library ops lowered as generated kernels where the backend asks for them: a convolution as an
implicit GEMM, max and average pooling as reductions over the window, cumulative sums and products
as scans. Each is an expression over the output coordinates, like every other value (see lower.py)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from ..graph import Node
from .build import ic, iop, land, op, where
from .ir import Const, Expr, Reduce, Scan, Var


def _taps(lw: Any, exts: Sequence[int]) -> tuple[Var, list[Expr]]:
    """A fresh reduction variable over (input channel, kernel offsets...) of these extents, and each of
    them decoded from it, row-major."""
    k = lw.fresh(math.prod(exts), "k")
    taps: list[Expr] = []
    stride = 1
    for ext in reversed(exts):
        taps.insert(0, iop("%", iop("//", k, ic(stride)), ic(ext)) if stride > 1 else iop("%", k, ic(ext)))
        stride *= ext
    return k, taps


def conv(lw: Any, n: Node, c: Sequence[Expr], mask: Expr | None, inline: set[int]) -> Expr:
    """A convolution as an implicit GEMM: rows (batch, output position) x output channels, one reduction
    axis over (input channel of the group, kernel offsets) decoded by index arithmetic; the input is
    read where the window lands (zeros outside, the padding), never copied into columns. A depthwise
    convolution's reduction is its window alone (a pointwise kernel once unrolled)."""
    x, w = n.args[0], n.args[1]
    assert x is not None and w is not None
    at = n.attrs
    groups = int(at.get("groups", 1))
    k, taps = _taps(lw, [w.shape[1], *w.shape[2:]])
    pos: list[Expr] = []
    valid: Expr | None = None
    for i, kt in enumerate(taps[1:]):
        p = iop("-", iop("+", iop("*", c[2 + i], ic(at["stride"][i])), iop("*", kt, ic(at["dilation"][i]))),
                ic(at["padding"][i]))
        pos.append(p)
        if at["padding"][i]:
            valid = land(valid, land(iop(">=", p, ic(0)), iop("<", p, ic(x.shape[2 + i]))))
    # grouped (a depthwise convolution): output channel o reads input channels of its group, o // (C_out / groups)
    cin = taps[0] if groups == 1 else iop("+", iop("*", iop("//", c[1], ic(n.shape[1] // groups)), ic(w.shape[1])),
                                          taps[0])
    a = lw.expr(x, [c[0], cin] + pos, land(mask, valid), inline)
    b = lw.expr(w, [c[1]] + taps, mask, inline)
    # one input channel per output (depthwise): a window sum, not a contraction (the unroller's case)
    out: Expr = Reduce("sum" if groups > 1 and w.shape[1] == 1 else "dot", op("mul", [a, b], n.dtype), (k,), n.dtype)
    bias = n.args[2] if len(n.args) > 2 else None
    if bias is not None:
        out = op("add", [out, lw.expr(bias, [c[1]], mask, inline)], n.dtype)
    return out


def conv_transpose(lw: Any, n: Node, c: Sequence[Expr], mask: Expr | None, inline: set[int]) -> Expr:
    """A transposed convolution as an implicit GEMM gathering into each output: one reduction over (input
    channel, kernel offsets). Output o takes offset k from input i where o + padding - k * dilation =
    i * stride; elsewhere the tap is a masked zero. Every offset is a tap, so the weights (B) are the same
    matrix for every output: taking only the output's phase of offsets (1 / stride of them) would make B
    depend on the output's position, a packed copy per position. Ungrouped only (a group's input channels
    would depend on the output column: not a GEMM)."""
    x, w = n.args[0], n.args[1]
    assert x is not None and w is not None
    at = n.attrs
    k, taps = _taps(lw, [x.shape[1], *w.shape[2:]])
    pos: list[Expr] = []
    valid: Expr | None = None
    for i, t in enumerate(taps[1:]):
        s = int(at["stride"][i])
        num = iop("-", iop("+", c[2 + i], ic(at["padding"][i])), iop("*", t, ic(int(at["dilation"][i]))))
        p = iop("//", num, ic(s)) if s > 1 else num
        ok = land(iop(">=", num, ic(0)), iop("<", p, ic(x.shape[2 + i])))
        valid = land(valid, land(iop("==", iop("%", num, ic(s)), ic(0)), ok) if s > 1 else ok)
        pos.append(p)
    a = lw.expr(x, [c[0], taps[0]] + pos, land(mask, valid), inline)
    b = lw.expr(w, [taps[0], c[1]] + taps[1:], mask, inline)
    out: Expr = Reduce("dot", op("mul", [a, b], n.dtype), (k,), n.dtype)
    bias = n.args[2] if len(n.args) > 2 else None
    if bias is not None:
        out = op("add", [out, lw.expr(bias, [c[1]], mask, inline)], n.dtype)
    return out


def masked_taps(n: Node) -> int:
    """Taps the generated form of `n` computes per tap that counts: a transposed convolution's every kernel
    offset, of which 1 / stride per dimension lands on an input position; 1 for everything else."""
    return math.prod(int(s) for s in n.attrs["stride"]) if n.op == "conv_transpose" else 1


def pool(lw: Any, n: Node, c: Sequence[Expr], mask: Expr | None, inline: set[int]) -> Expr:
    """Max or average pooling: a reduction over the window's offsets. Positions outside the input
    (padding, or a ceil-mode window running past the end) are skipped by max and count as zeros in
    the sum; the average divides by torch's count (clipped to the padded input, or to the input
    without count_include_pad, or divisor_override)."""
    x = n.args[0]
    assert x is not None
    at = n.attrs
    ks = list(at["kernel"])
    lead = len(n.shape) - len(ks)
    stride = list(at["stride"]) or ks
    dil = list(at.get("dilation") or [1] * len(ks))
    offs = tuple(lw.fresh(k, "w") for k in ks)
    pos: list[Expr] = []
    valid: Expr | None = None
    for i, o in enumerate(offs):
        if ks[i] == 1 and stride[i] == 1 and at["padding"][i] == 0:  # an axis the window leaves alone (a
            pos.append(c[lead + i])  # channels-last pool's channels): always inside
            continue
        p = iop("-", iop("+", iop("*", c[lead + i], ic(stride[i])), iop("*", o, ic(dil[i]))), ic(at["padding"][i]))
        pos.append(p)
        valid = land(valid, land(iop(">=", p, ic(0)), iop("<", p, ic(x.shape[lead + i]))))
    body = lw.expr(x, list(c[:lead]) + pos, land(mask, valid), inline)
    if n.op == "max_pool_indices":
        return _argmax_position(n, x.shape[lead:], c[lead:], offs, body, valid, stride, dil)
    if n.op == "max_pool":
        return Reduce("max", body if valid is None else where(valid, body, Const(-math.inf, n.dtype), n.dtype),
                      offs, n.dtype)
    total = Reduce("sum", body if valid is None else where(valid, body, Const(0.0, n.dtype), n.dtype), offs,
                   n.dtype)
    if at.get("divisor_override"):
        return op("div", [total, Const(float(at["divisor_override"]), n.dtype)], n.dtype)
    count: Expr = ic(1)
    for i, k in enumerate(ks):
        pad, size = at["padding"][i], x.shape[lead + i]
        start = iop("-", iop("*", c[lead + i], ic(stride[i])), ic(pad))
        end = iop("min", iop("+", start, ic(k)), ic(size + pad))
        if not at["count_include_pad"]:
            start, end = iop("max", start, ic(0)), iop("min", end, ic(size))
        count = iop("*", count, iop("-", end, start))
    return op("div", [total, op("cast", [count], n.dtype, dtype=n.dtype)], n.dtype)


def _argmax_position(n: Node, sizes: Sequence[int], c: Sequence[Expr], offs: Sequence[Var], body: Expr,
                     valid: Expr | None, stride: Sequence[int], dil: Sequence[int]) -> Expr:
    """Where a max pool's window has its maximum, as torch returns it: the flat position in the input's
    spatial plane (h * W + w). The first maximum in the window's order wins, as torch's scan keeps it (a tie
    elsewhere is as valid a subgradient: the verifier judges indices by the values they point at). A window
    whose inside is all -inf keeps its first offset, which may lie in the padding: it is moved along each
    axis to the window's first position inside the input, where torch starts its scan."""
    at = n.attrs
    ks = list(at["kernel"])
    masked = body if valid is None else where(valid, body, Const(-math.inf, body.dtype), body.dtype)
    k: Expr = Reduce("argmax", masked, tuple(offs), "i64")
    flat: Expr = ic(0)
    for i in range(len(ks)):
        o = iop("%", iop("//", k, ic(math.prod(ks[i + 1:]))), ic(ks[i]))
        start = iop("-", iop("*", c[i], ic(stride[i])), ic(at["padding"][i]))
        before = iop("max", iop("-", ic(0), start), ic(0))  # positions of padding before the input
        first = iop("+", start, iop("*", iop("//", iop("+", before, ic(dil[i] - 1)), ic(dil[i])), ic(dil[i])))
        p = iop("max", iop("+", start, iop("*", o, ic(dil[i]))), first)  # a chosen inside position is >= first
        flat = iop("+", iop("*", flat, ic(sizes[i])), p)
    return flat


def scan(lw: Any, n: Node, c: Sequence[Expr], mask: Expr | None, inline: set[int]) -> Expr:
    """cumsum / cumprod along one axis, read at the output's position there. Exclusive scans shift the
    body by one (the identity enters at the start); the body is converted to the output type first,
    as torch accumulates (bool and integer sums in int64)."""
    x = n.args[0]
    assert x is not None
    at = n.attrs
    d = at["dim"] % len(n.shape)
    j = lw.fresh(n.shape[d], "s")
    idx, valid = list(c), None
    idx[d] = j
    if at["exclusive"]:
        src = iop("+", j, ic(1)) if at["reverse"] else iop("-", j, ic(1))
        valid = land(iop(">=", src, ic(0)), iop("<", src, ic(n.shape[d])))
        idx[d] = src
    body = lw.expr(x, idx, land(mask, valid), inline)
    if x.dtype != n.dtype:
        body = op("cast", [body], n.dtype, dtype=n.dtype)
    kind = "sum" if n.op == "cumsum" else "prod"
    if valid is not None:
        body = where(valid, body, Const(0 if kind == "sum" else 1, n.dtype), n.dtype)
    return Scan(kind, body, j, c[d], bool(at["reverse"]), n.dtype)


GENERATED: dict[str, Callable[..., Expr]] = {"conv": conv, "conv_transpose": conv_transpose, "max_pool": pool,
                                             "max_pool_indices": pool, "avg_pool": pool, "cumsum": scan,
                                             "cumprod": scan}
