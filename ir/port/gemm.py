"""A tiled matmul written back as one: where every program multiplies a block of A's rows by a block of
B's columns over the whole K, and the stores put each product (through an elementwise epilogue) at those
rows and columns of C, covering C once, C is A @ B with the epilogue applied to the whole of it. The
library then runs the GEMM (cuBLAS, MKL) instead of a batched product of gathered tiles."""

from __future__ import annotations

import numpy as np

from ..convert import LiftCtx
from ..graph import Node
from . import views

Read = tuple[str, np.ndarray, np.ndarray, float]  # (argument, addresses, mask, masked-off value)
ELEMENTWISE = {"add", "sub", "mul", "div", "maximum", "minimum", "where", "cast", "gt", "lt", "ge", "le", "relu",
               "exp", "neg", "sigmoid", "tanh"}


def read_of(n: Node) -> Read | None:
    """The addresses a tile was read from, through the broadcasts and padding laid over the read."""
    while n.op in ("expand", "pad") and "port_read" not in n.meta:
        n = n.args[0]  # type: ignore[assignment]
    return n.meta.get("port_read")


def _decode(off: np.ndarray, shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    return off // shape[1], off % shape[1]


def _operand(tensors: dict[str, Node], read: tuple[str, np.ndarray, np.ndarray], k_axis: int,
             cx: LiftCtx) -> tuple[Node, np.ndarray] | None:
    """The whole operand as a matrix with K along `k_axis` (0 or 1 of the result), and the index along the
    other axis per tile element; None unless the tile is that matrix's rows (columns) over all of K."""
    arg, off, mask = read
    t = tensors.get(arg)
    if t is None or t.type.rank != 2:
        return None
    i0, i1 = _decode(off, tuple(t.shape))
    kk = np.arange(off.shape[-2 if k_axis == 0 else -1])
    kk = kk.reshape(-1, 1) if k_axis == 0 else kk.reshape(1, -1)
    for transposed, (kidx, other) in enumerate(((i1, i0), (i0, i1)) if k_axis == 1 else ((i0, i1), (i1, i0))):
        K = t.shape[1] if (k_axis == 1) != bool(transposed) else t.shape[0]
        if not ((kidx == kk) | ~mask).all():
            continue
        first = np.take(other, 0, axis=-1 if k_axis == 1 else -2)
        line = other == (first[..., :, None] if k_axis == 1 else first[..., None, :])
        if not (line | ~mask).all():
            continue
        valid = mask.any(axis=-1 if k_axis == 1 else -2)
        want = (kk < K) & (valid[..., :, None] if k_axis == 1 else valid[..., None, :])
        if not (mask == want).all():
            continue
        m = t if not transposed else cx.add("permute", [t], dims=[1, 0])
        return m, np.where(valid, first, -1)
    return None


def whole(cx: LiftCtx, tensors: dict[str, Node], base: Node, off: np.ndarray, mask: np.ndarray, val: Node,
          what: str) -> Node | None:
    """C written as one GEMM (and its epilogue), or None where the store is not of that form."""
    if base.type.rank != 2:
        return None
    shape = tuple(np.broadcast_shapes(off.shape, mask.shape, tuple(val.shape)))
    m = np.broadcast_to(mask, shape)
    rows, cols = _decode(np.broadcast_to(off, shape), tuple(base.shape))
    hit = np.broadcast_to(off, shape)[m]
    if hit.size != base.type.numel or np.unique(hit).size != hit.size:
        return None  # C is not covered once

    done: dict[int, Node | None] = {}

    def c_space(n: Node) -> Node | None:
        if id(n) not in done:
            done[id(n)] = _c_space(n)
        return done[id(n)]

    def _c_space(n: Node) -> Node | None:
        """`n` (a tile-space value) as a value over C."""
        if all(d == 1 for d in n.shape):  # a number: the same everywhere
            return cx.add("reshape", [n], shape=[1, 1])
        g = n.meta.get("port_gemm")
        if n.op == "matmul" and g is not None:
            a = _operand(tensors, g[0], 1, cx)
            b = _operand(tensors, g[1], 0, cx)
            if a is None or b is None:
                return None
            (ma, ra), (mb, cb) = a, b
            r = np.broadcast_to(ra[..., :, None], shape)
            c = np.broadcast_to(cb[..., None, :], shape)
            if not ((r == rows) & (c == cols) | ~m).all() or ma.shape[1] != mb.shape[0]:
                return None
            return cx.add("matmul", [ma, mb])
        if n.op in ELEMENTWISE and any(read_of(x) is None and x.meta.get("port_gemm") is None
                                       and x.op in ELEMENTWISE | {"matmul"} or x.meta.get("port_gemm") is not None
                                       for x in n.args if x is not None):
            args = []
            for x in n.args:
                y = c_space(x) if x is not None else None
                if y is None:
                    return None
                args.append(y)
            return cx.add(n.op, args, **n.attrs)
        # anything else (a bias read, a constant): its elements moved to C's places
        full = n if tuple(n.shape) == shape else cx.add("expand", [n], shape=list(shape))
        return views.written(cx, base, off, mask, full, False, what)

    top = val
    if not (top.meta.get("port_gemm") is not None or top.op in ELEMENTWISE):
        return None
    out = c_space(top)
    if out is None or not _has_gemm(top):
        return None
    return out if out.dtype == base.dtype else cx.add("cast", [out], dtype=base.dtype)


def _has_gemm(n: Node) -> bool:
    seen, todo = set(), [n]
    while todo:
        x = todo.pop()
        if id(x) in seen:
            continue
        seen.add(id(x))
        if x.meta.get("port_gemm") is not None:
            return True
        if x.op in ELEMENTWISE:
            todo += [a for a in x.args if a is not None]
    return False
