"""Views as strided reads: the element strides a chain of reshape / permute / expand gives over the
contiguous source it starts from, or None where some step is not a strided view of the step before
(a reshape merging dimensions that are not adjacent in memory)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from ..graph import Node
from ..kernel.ir import row_major_strides

VIEW_OPS = ("reshape", "permute", "expand")


def contiguous(shape: Sequence[int]) -> list[int]:
    return list(row_major_strides(shape))


def expand_strides(shape: Sequence[int], strides: Sequence[int], new: Sequence[int]) -> list[int]:
    """Strides of (shape, strides) broadcast to `new` (right-aligned): 0 along every broadcast axis."""
    off = len(new) - len(shape)
    return [0] * off + [0 if s == 1 and t != 1 else st for s, t, st in zip(shape, new[off:], strides)]


def reshape_strides(shape: Sequence[int], strides: Sequence[int], new: Sequence[int]) -> list[int] | None:
    """Strides of `new` over the same memory as (shape, strides), or None if no strides express it. Runs
    of source dimensions that are contiguous with each other form chunks; each chunk must split exactly
    into consecutive dimensions of `new`."""
    if any(type(d) is not int for d in (*shape, *new)):
        return None
    if math.prod(shape) == 0 or not shape:
        return contiguous(new) if math.prod(shape) == math.prod(new) else None
    out = [0] * len(new)
    vd = len(new) - 1
    base, t_numel, v_numel = strides[-1], 1, 1
    for td in range(len(shape) - 1, -1, -1):
        t_numel *= shape[td]
        if td == 0 or (shape[td - 1] != 1 and strides[td - 1] != t_numel * base):  # the chunk ends here
            while vd >= 0 and (v_numel < t_numel or new[vd] == 1):
                out[vd] = v_numel * base
                v_numel *= new[vd]
                vd -= 1
            if v_numel != t_numel:
                return None
            if td > 0:
                base, t_numel, v_numel = strides[td - 1], 1, 1
    return out if vd == -1 else None


def view_strides(v: Node, stop: tuple[str, ...]) -> tuple[Node, list[int]] | None:
    """(source, strides) when `v` is a chain of view ops down to a node whose op is in `stop`, read
    contiguously; None otherwise."""
    chain: list[Node] = []
    n = v
    while n.op in VIEW_OPS:
        chain.append(n)
        if not n.args or n.args[0] is None:
            return None
        n = n.args[0]
    if n.op not in stop or any(type(d) is not int for m in (n, *chain) for d in m.type.shape):
        return None  # a run-time size: no strides fixed at translation
    shape, strides = list(n.type.shape), contiguous(n.type.shape)
    for step in reversed(chain):
        if step.op == "permute":
            dims = list(step.attrs["dims"])
            strides = [strides[d] for d in dims]
        elif step.op == "expand":
            strides = expand_strides(shape, strides, step.type.shape)
        else:
            got = reshape_strides(shape, strides, step.type.shape)
            if got is None:
                return None
            strides = got
        shape = list(step.type.shape)
    return n, strides
