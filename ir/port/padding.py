"""Ops on a block row longer than its tensor's row (`values.Sym.pad`): the tensor's part is computed, the
padding's value is carried as a number. A reduction whose identity is that number (the max of a row
padded with -inf, the sum of one padded with 0) reads the tensor's part alone, so a row kernel lifts to
the row's own reductions, not to reductions over a padded copy."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .values import Num, Sym

Executor = Any  # ir.port.execute.Executor, which calls this module

_NP = {"addf": np.add, "subf": np.subtract, "mulf": np.multiply, "divf": np.divide, "maxnumf": np.fmax,
       "minnumf": np.fmin, "maximumf": np.maximum, "minimumf": np.minimum}
_GRAPH = {"addf": "add", "subf": "sub", "mulf": "mul", "divf": "div", "maxnumf": "maximum", "minnumf": "minimum",
          "maximumf": "maximum", "minimumf": "minimum"}
IDENTITY = {"sum": 0.0, "amax": -math.inf, "amin": math.inf, "prod": 1.0}


def _padded_axes(v: Sym) -> list[int]:
    assert v.pad is not None
    return [d for d, (e, f) in enumerate(zip(v.n.shape, v.pad[0])) if e != f]


def _absorbed(kind: str, fill: float, first: bool) -> float | None:
    """The padding's value after `kind` with an unknown (finite) operand, where the padding decides it."""
    if kind in ("addf", "subf") and math.isinf(fill):
        return fill if first or kind == "addf" else -fill
    if kind == "mulf" and fill == 0.0 or kind == "divf" and first and fill == 0.0:
        return 0.0
    return None


def binary(ex: Executor, kind: str, a: Any, b: Any) -> Sym | None:
    """`a <kind> b` with a padded operand, kept padded; None where the padding's value is not one number
    (the caller pads the operand and computes the whole block)."""
    if kind not in _NP:
        return None
    p, o, first = (a, b, True) if isinstance(a, Sym) and a.pad else (b, a, False)
    assert p.pad is not None
    full, fill = p.pad
    cx = ex.cx
    if isinstance(o, Sym) and o.pad is not None:
        # both padded: the same row cut at the same place (either may be broadcast along other axes)
        if len(o.pad[0]) != len(full) or any(
                (x != y and 1 not in (x, y)) for x, y in zip(o.pad[0], full)) or any(
                o.pad[0][d] > 1 and full[d] > 1 and o.n.shape[d] != p.n.shape[d] for d in range(len(full))):
            return None
        with np.errstate(all="ignore"):
            f = _NP[kind](np.float32(a.pad[1]), np.float32(b.pad[1]))
        both = tuple(max(x, y) for x, y in zip(o.pad[0], full))
        return Sym(cx.add(_GRAPH[kind], [a.n, b.n]), p.elem, (both, float(f)))
    axes = _padded_axes(p)
    if isinstance(o, Num):
        arr = np.broadcast_to(o.a, np.broadcast_shapes(o.a.shape, (1,) * (len(full) - o.a.ndim)))
        if arr.ndim != len(full):
            return None
        outside = np.zeros([full[d] if arr.shape[d] != 1 else 1 for d in range(len(full))], dtype=bool)
        for d in axes:
            if arr.shape[d] != 1:
                idx = [slice(None)] * arr.ndim
                idx[d] = slice(p.n.shape[d], None)
                outside[tuple(idx)] = True
        vals = np.broadcast_to(arr, outside.shape)[outside] if outside.any() else arr.reshape(-1)[:1]
        with np.errstate(all="ignore"):
            got = _NP[kind](np.float32(fill), vals) if first else _NP[kind](vals, np.float32(fill))
        if got.size and not (np.asarray(got) == np.asarray(got).reshape(-1)[0]).all():
            return None
        cut = arr[tuple(slice(0, p.n.shape[d]) if arr.shape[d] != 1 else slice(None) for d in range(arr.ndim))]
        on = ex.node(Num(np.ascontiguousarray(cut), o.elem))
        f = float(np.asarray(got).reshape(-1)[0]) if got.size else fill
        args = [p.n, on] if first else [on, p.n]
        return Sym(cx.add(_GRAPH[kind], args), p.elem, (full, f))
    if isinstance(o, Sym) and o.pad is None and o.n.op == "expand":  # a splat: its value before broadcasting
        inner = o.n.args[0]
        if inner is not None and inner.type.rank == o.n.type.rank and all(inner.shape[d] == 1 for d in axes):
            o = Sym(inner, o.elem)
    if isinstance(o, Sym) and all(d >= o.n.type.rank or o.n.shape[d] == 1 for d in axes):
        f2 = _absorbed(kind, fill, first)
        if f2 is None:
            return None
        args = [p.n, o.n] if first else [o.n, p.n]
        return Sym(cx.add(_GRAPH[kind], args), p.elem, (full, f2))
    return None


def reduce(ex: Executor, gop: str, v: Sym, axis: int) -> Sym | None:
    """A reduction of a padded value along `axis`: of its tensor part where the padding is the reduction's
    identity (or the axis is not padded); None elsewhere."""
    assert v.pad is not None
    full, fill = v.pad
    if axis in _padded_axes(v) and fill != IDENTITY[gop]:
        return None
    n = v.n
    if n.shape[axis] == 1 and full[axis] != 1 and axis not in _padded_axes(v):
        return None  # a broadcast axis reduced: the caller expands it first
    out = ex.cx.add(gop, [n], dims=[axis], keepdim=False)
    rest = tuple(s for d, s in enumerate(full) if d != axis)
    return Sym(out, v.elem, (rest, fill) if tuple(out.shape) != rest else None)
