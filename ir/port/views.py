"""Reads and writes at addresses known at lift time, as graph IR. Where the addresses are affine in the
value's axes (after splitting an axis in two or three, as a grid walked in groups needs), a read is a
view of the flat tensor (slices, reshapes, a permutation, broadcasts, padding with the masked-off
value); elsewhere it is a gather of constant indices. A store is the same read taken the other way:
for every element of the tensor, which element of the stored block lands there."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import numpy as np
import torch

from ..convert import LiftCtx
from ..errors import AkgError
from ..graph import Node

Affine = tuple[int, list[int]]  # (offset at the origin, stride per axis)


def _divisors(n: int) -> list[int]:
    return [f for f in range(2, n) if n % f == 0]


def _affine(off: np.ndarray, mask: np.ndarray) -> Affine | None:
    """(c, strides) with off == c + sum(stride_d * i_d) wherever mask holds, else None."""
    o = off.astype(np.int64)
    origin = (0,) * o.ndim
    c = int(o[origin])
    strides = []
    for d in range(o.ndim):
        if o.shape[d] == 1:
            strides.append(0)
            continue
        at = [0] * o.ndim
        at[d] = 1
        strides.append(int(o[tuple(at)]) - c)
    pred = np.full((1,) * o.ndim, c, dtype=np.int64)
    for d, s in enumerate(strides):
        if s:
            shape = [1] * o.ndim
            shape[d] = o.shape[d]
            pred = pred + s * np.arange(o.shape[d], dtype=np.int64).reshape(shape)
    shape = np.broadcast_shapes(o.shape, mask.shape)
    ok = (np.broadcast_to(o, shape) == np.broadcast_to(pred, shape)) | ~np.broadcast_to(mask, shape)
    return (c, strides) if ok.all() else None


def _profile_split(p: np.ndarray) -> list[int] | None:
    """Sizes that split a 1-D address profile into axes it is affine in (at most three)."""
    n = p.shape[0]
    ones = np.ones(1, dtype=bool)
    if _affine(p, ones) is not None:
        return [n]
    for f in _divisors(n):
        if _affine(p.reshape(n // f, f), ones) is not None:
            return [n // f, f]
    for f1, f2 in itertools.product(_divisors(n), repeat=2):
        if n % (f1 * f2) == 0 and n // (f1 * f2) > 1 and _affine(p.reshape(n // (f1 * f2), f1, f2), ones) is not None:
            return [n // (f1 * f2), f1, f2]
    return None


def _split(off: np.ndarray, mask: np.ndarray) -> tuple[list[list[int]], Affine] | None:
    """Axis splits under which the addresses are affine, and the affine form in the split axes."""
    shape = np.broadcast_shapes(off.shape, mask.shape)
    found = _affine(off, mask)
    if found is not None:
        return [[s] for s in shape], found
    sizes: list[list[int]] = []
    for d, n in enumerate(shape):
        if off.shape[d] == 1:
            sizes.append([n])
            continue
        prof = off[tuple(slice(None) if k == d else 0 for k in range(off.ndim))]
        got = _profile_split(prof)
        if got is None:
            return None
        sizes.append(got)
    flat = [s for ss in sizes for s in ss]
    if len(flat) > 8:
        return None
    found = _affine(np.broadcast_to(off, shape).reshape(flat), np.broadcast_to(mask, shape).reshape(flat))
    return (sizes, found) if found is not None else None


def _box(mask: np.ndarray, shape: Sequence[int]) -> tuple[list[int], bool]:
    """Per axis, how far the masked-on elements reach (they start at 0, or the read is not a box), and
    whether the mask is exactly that box."""
    m = np.broadcast_to(mask, tuple(shape))
    ext = []
    for d in range(m.ndim):
        along = m.any(axis=tuple(k for k in range(m.ndim) if k != d)) if m.ndim > 1 else m
        hit = np.flatnonzero(along)
        ext.append(int(hit[-1]) + 1 if hit.size else 0)
    box = np.ones((1,) * m.ndim, dtype=bool)
    for d, e in enumerate(ext):
        sh = [1] * m.ndim
        sh[d] = m.shape[d]
        box = box & (np.arange(m.shape[d]).reshape(sh) < e)
    return ext, bool((np.broadcast_to(box, m.shape) == m).all())


def _view(cx: LiftCtx, flat: Node, c: int, strides: list[int], ext: list[int]) -> Node | None:
    """flat[c + sum(strides[d] * i_d)] for i_d < ext[d], as slices and reshapes of the flat tensor."""
    moving = sorted((d for d, s in enumerate(strides) if s and ext[d] > 1), key=lambda d: -strides[d])
    if any(strides[d] < 0 for d in moving) or c < 0:
        return None
    for a, b in zip(moving, moving[1:]):
        if strides[a] % strides[b] or strides[a] < strides[b] * ext[b]:
            return None
    n = flat.shape[0]
    if not moving:
        v = cx.add("slice", [flat], dim=0, start=c, end=c + 1, step=1)
        return cx.add("reshape", [v], shape=[1] * len(ext))
    span = strides[moving[0]] * ext[moving[0]]
    if c + span > n:  # the last row's tail lies past the end (never read): pad so the reshape holds
        flat = cx.add("pad", [flat], pads=[0, c + span - n], value=0.0)
    v = cx.add("slice", [flat], dim=0, start=c, end=c + span, step=1) if (c, span) != (0, n) else flat
    shape = [ext[moving[0]], strides[moving[0]]]
    v = cx.add("reshape", [v], shape=shape)
    for d in moving[1:]:
        last = shape[-1]
        shape = shape[:-1] + [last // strides[d], strides[d]]
        v = cx.add("reshape", [v], shape=shape)
        if shape[-2] != ext[d]:
            v = cx.add("slice", [v], dim=len(shape) - 2, start=0, end=ext[d], step=1)
            shape[-2] = ext[d]
    if shape[-1] != 1:
        v = cx.add("slice", [v], dim=len(shape) - 1, start=0, end=1, step=1)
    v = cx.add("reshape", [v], shape=shape[:-1])  # axes in `moving` order
    order = sorted(moving)
    if moving != order:
        v = cx.add("permute", [v], dims=[moving.index(d) for d in order])
    out = [ext[d] if d in moving else 1 for d in range(len(ext))]
    v = cx.add("reshape", [v], shape=out)
    if any(out[d] != ext[d] for d in range(len(ext))):
        v = cx.add("expand", [v], shape=list(ext))
    return v


def gather(cx: LiftCtx, src: Node, off: np.ndarray, mask: np.ndarray | None, fill: float, what: str) -> Node:
    """src.flat[off] where mask holds, `fill` elsewhere; the result has the shape of off and mask broadcast."""
    mask = np.ones((1,) * off.ndim, dtype=bool) if mask is None else mask.astype(bool)
    shape = tuple(np.broadcast_shapes(off.shape, mask.shape))
    numel = src.type.numel
    flat = src if src.type.rank == 1 else cx.add("reshape", [src], shape=[numel])
    hit = np.broadcast_to(off, shape)[np.broadcast_to(mask, shape)]
    if hit.size and (hit.min() < 0 or hit.max() >= numel):
        bad = int(hit.min() if hit.min() < 0 else hit.max())
        raise AkgError(f"{what} reads element {bad} of a tensor of {numel}: out of bounds under its mask")
    v = _merged(cx, flat, off, mask, shape, fill) if hit.size else None
    if v is not None:
        return v
    got = _split(off, mask)
    if got is not None and hit.size:
        sizes, (c, strides) = got
        flat_sizes = [s for ss in sizes for s in ss]
        smask = np.broadcast_to(mask, shape).reshape(flat_sizes)
        ext, is_box = _box(smask, flat_sizes)
        v = _view(cx, flat, c, strides, ext)
        if v is not None and all(
                ext[i] == flat_sizes[i] for i in range(len(ext)) if not _is_last_of_group(sizes, i)):
            v = pad_to(cx, v, ext, flat_sizes, fill)
            if list(flat_sizes) != list(shape):
                v = cx.add("reshape", [v], shape=list(shape))
            if not is_box:
                v = cx.add("where", [constant(cx, mask), v, cx.scalar(fill, v)])
            return v
    # a gather of constant indices
    idx = np.where(np.broadcast_to(mask, shape), np.broadcast_to(off, shape), 0).reshape(-1)
    v = cx.add("index_select", [flat, constant(cx, idx.astype(np.int64))], dim=0)
    v = cx.add("reshape", [v], shape=list(shape))
    if not mask.all():
        v = cx.add("where", [constant(cx, mask), v, cx.scalar(fill, v)])
    return v


def _chains(strides: list[int], shape: Sequence[int]) -> list[list[int]]:
    """The moving axes grouped where they walk memory as one (outer axis first in each group): an axis whose
    stride is the next one's stride times that one's size continues it."""
    chains = [[d] for d in range(len(shape)) if strides[d] and shape[d] > 1]
    merged = True
    while merged:
        merged = False
        for a, b in itertools.permutations(chains, 2):
            if strides[a[-1]] == strides[b[0]] * shape[b[0]] and strides[b[0]] > 0:
                a.extend(b)
                chains.remove(b)
                merged = True
                break
    return chains


def _merged(cx: LiftCtx, flat: Node, off: np.ndarray, mask: np.ndarray, shape: tuple[int, ...],
            fill: float, lazy: bool = False) -> Node | tuple[Node, list[int]] | None:
    """The read as a view after merging axes that walk memory as one (a program id and its block's range,
    a loop's iterations and its chunk): a mask that cuts a tensor's end is a box in the merged axes."""
    found = _affine(off, mask)
    if found is None:
        return None
    c, strides = found
    chains = _chains(strides, shape)
    rest = [d for d in range(len(shape)) if not (strides[d] and shape[d] > 1)]
    perm = [d for ch in chains for d in ch] + rest
    msizes = [math.prod(shape[d] for d in ch) for ch in chains] + [shape[d] for d in rest]
    mstrides = [strides[ch[-1]] for ch in chains] + [0] * len(rest)
    m = np.broadcast_to(mask, shape).transpose(perm).reshape(msizes)
    ext, is_box = _box(m, msizes)
    if not is_box and len(msizes) == len(shape):
        return None  # nothing merged: the split path may do better
    v = _view(cx, flat, c, mstrides, ext)
    if v is None:
        return None
    order = [ch[0] for ch in chains]
    if lazy and is_box and ext != msizes and all(len(ch) == 1 for ch in chains) and order == sorted(order) \
            and all(shape[d] == 1 for d in rest):  # nothing merged or moved: the caller keeps the padding
        box = [1] * len(shape)  # symbolic (`values.Sym.pad`)
        for d, e in zip(order, ext):
            box[d] = e
        return (v if list(v.shape) == box else cx.add("reshape", [v], shape=box)), box
    v = pad_to(cx, v, ext, msizes, fill)
    v = cx.add("reshape", [v], shape=[shape[d] for d in perm])
    if perm != sorted(perm):
        v = cx.add("permute", [v], dims=[perm.index(d) for d in range(len(shape))])
    if not is_box:
        v = cx.add("where", [constant(cx, mask), v, cx.scalar(fill, v)])
    return v


def _covering(cx: LiftCtx, off: np.ndarray, mask: np.ndarray, val: Node, shape: tuple[int, ...],
              base: Node) -> Node | None:
    """A store that writes every element of `base` once at affine addresses (a box in merged axes): the
    stored block rearranged (merged, cut to the box, ordered by address), without inverting addresses."""
    found = _affine(off, mask)
    if found is None:
        return None
    c, strides = found
    if any(strides[d] == 0 and shape[d] > 1 for d in range(len(shape))):
        return None  # a broadcast axis stores one element many times
    chains = _chains(strides, shape)
    chains.sort(key=lambda ch: -strides[ch[-1]])  # by address, outermost first
    rest = [d for d in range(len(shape)) if d not in {x for ch in chains for x in ch}]
    perm = [d for ch in chains for d in ch] + rest
    msizes = [math.prod(shape[d] for d in ch) for ch in chains]
    mstrides = [strides[ch[-1]] for ch in chains]
    m = np.broadcast_to(mask, shape).transpose(perm).reshape(msizes + [1] * len(rest))
    ext, is_box = _box(m, msizes + [1] * len(rest))
    ext = ext[:len(msizes)]
    dense = all(mstrides[i] == mstrides[i + 1] * ext[i + 1] for i in range(len(ext) - 1)) and \
        (not mstrides or mstrides[-1] == 1)
    if not is_box or c != 0 or not dense or math.prod(ext) != base.type.numel:
        return None
    v = val if tuple(val.shape) == shape else cx.add("expand", [val], shape=list(shape))
    if perm != list(range(len(shape))):
        v = cx.add("permute", [v], dims=perm)
    if list(v.shape) != msizes:
        v = cx.add("reshape", [v], shape=msizes)
    inner = unpadded(v, ext)  # a value padded to its block and cut back: the value itself
    if inner is not None:
        v = inner
    for i, (e, n) in enumerate(zip(ext, msizes)):
        if e != n and inner is None:
            v = cx.add("slice", [v], dim=i, start=0, end=e, step=1)
    return cx.add("reshape", [v], shape=list(base.shape))


def gather_lazy(cx: LiftCtx, src: Node, off: np.ndarray, mask: np.ndarray | None, fill: float,
                what: str) -> tuple[Node, list[int] | None]:
    """As `gather`, but a read that is a box of the tensor padded with `fill` (a row shorter than its
    block) comes back unpadded, with the box: (node, its extent per axis), or (node, None)."""
    if mask is not None and off.size:
        shape = tuple(np.broadcast_shapes(off.shape, mask.shape))
        numel = src.type.numel
        flat = src if src.type.rank == 1 else cx.add("reshape", [src], shape=[numel])
        hit = np.broadcast_to(off, shape)[np.broadcast_to(mask.astype(bool), shape)]
        if hit.size and hit.min() >= 0 and hit.max() < numel:
            got = _merged(cx, flat, off, mask.astype(bool), shape, fill, lazy=True)
            if isinstance(got, tuple):
                return got
    return gather(cx, src, off, mask, fill, what), None


def unpadded(v: Node, ext: list[int]) -> Node | None:
    """The input of `v` where `v` pads it at the end to its shape and `ext` is the input's shape."""
    if v.op != "pad" or list(v.args[0].shape) != list(ext):  # type: ignore[union-attr]
        return None
    pads = v.attrs["pads"]
    return v.args[0] if all(pads[i] == 0 for i in range(0, len(pads), 2)) else None


def _is_last_of_group(sizes: list[list[int]], i: int) -> bool:
    """Whether split axis i is an original axis' innermost part (the only one a mask may cut short)."""
    k = 0
    for ss in sizes:
        k += len(ss)
        if i == k - 1:
            return True
    return False


def pad_to(cx: LiftCtx, v: Node, ext: list[int], full: list[int], fill: float) -> Node:
    if ext == list(full):
        return v
    pads: list[int] = []
    for e, f in reversed(list(zip(ext, full))):
        pads += [0, f - e]
    return cx.add("pad", [v], pads=pads, value=float(fill))


def gather_nodes(cx: LiftCtx, src: Node, idx: Node) -> Node:
    """src.flat[idx] with idx a graph value (an address computed from loaded data)."""
    numel = src.type.numel
    flat = src if src.type.rank == 1 else cx.add("reshape", [src], shape=[numel])
    i = cx.add("clamp", [cx.add("cast", [idx], dtype="i64")], min=0, max=numel - 1)
    v = cx.add("index_select", [flat, cx.add("reshape", [i], shape=[idx.type.numel])], dim=0)
    return cx.add("reshape", [v], shape=list(idx.shape))


def constant(cx: LiftCtx, a: np.ndarray) -> Node:
    a = np.ascontiguousarray(a)
    key = f"port_const_{len(cx.graph.weights)}"
    n = cx.graph.param(key, torch.from_numpy(a.copy()), name="c")
    cx.graph.meta.setdefault("param_kinds", {})[key] = "constant"
    return n


def written(cx: LiftCtx, base: Node, off: np.ndarray, mask: np.ndarray, val: Node, atomic: bool,
            what: str) -> Node:
    """`base` after a store (or an atomic add) of `val` at `off` where `mask` holds."""
    shape = tuple(np.broadcast_shapes(off.shape, mask.shape, tuple(val.shape)))
    numel = base.type.numel
    m = np.broadcast_to(mask, shape).reshape(-1)
    pos = np.broadcast_to(off, shape).reshape(-1)[m]
    src = np.flatnonzero(m)
    if pos.size and (pos.min() < 0 or pos.max() >= numel):
        bad = int(pos.min() if pos.min() < 0 else pos.max())
        raise AkgError(f"{what} writes element {bad} of a tensor of {numel}: out of bounds under its mask")
    vflat = val if tuple(val.shape) == shape else cx.add("expand", [val], shape=list(shape))
    vflat = cx.add("reshape", [vflat], shape=[math.prod(shape)])
    if not atomic:
        whole = _covering(cx, off, mask, val, shape, base)
        if whole is not None:
            return whole
        uniq = np.unique(pos)
        if uniq.size < pos.size:
            raise AkgError(f"{what} stores to the same element from two places (a race on the GPU): not lifted")
        inv = np.full(numel, -1, dtype=np.int64)
        inv[pos] = src
        hit = inv >= 0
        new = gather(cx, vflat, inv.reshape(base.shape), hit.reshape(base.shape), 0.0, what)
        return new if hit.all() else cx.add("where", [constant(cx, hit.reshape(base.shape)), new, base])
    order = np.argsort(pos, kind="stable")
    pos, src = pos[order], src[order]
    counts = np.bincount(pos, minlength=numel)
    k = int(counts.max()) if counts.size else 0
    if k == 0:
        return base
    slot = np.arange(pos.size) - np.repeat(np.cumsum(counts) - counts, counts)[: pos.size]
    idx = np.full((numel, k), -1, dtype=np.int64)
    idx[pos, slot] = src
    adds = gather(cx, vflat, idx.reshape(tuple(base.shape) + (k,)), (idx >= 0).reshape(tuple(base.shape) + (k,)),
                  0.0, what)
    total = cx.add("sum", [adds], dims=[len(base.shape)], keepdim=False)
    if total.dtype != base.dtype:
        total = cx.add("cast", [total], dtype=base.dtype)
    return cx.add("add", [base, total])
