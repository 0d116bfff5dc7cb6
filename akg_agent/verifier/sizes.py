"""Inputs for a module of run-time sizes (`akg translate --dynamic`): the sizes it is checked at and
inputs of those sizes made from the problem's own `get_inputs()`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch


def dynamic_sizes(dynamic: dict[str, Any]) -> list[int]:
    """Sizes a module is checked at besides get_inputs()' own: 1, two primes (3, 17), one less than the
    largest size (a multiple of no power-of-two tile when the largest is one), the largest, and both
    sides of each schedule bucket's edge the module declares; each clipped to a name's bound."""
    if not dynamic:
        return []
    top = max(v["traced"] for v in dynamic.values())
    edges = {n for v in dynamic.values() for b in v.get("buckets", ()) for n in (b, b + 1)}  # each bucket's ends
    return sorted({n for n in (1, 3, 17, top - 1, top, *edges) if 1 <= n <= top})


def sized_inputs(make: Callable[[int], list[Any]], seed: int, dynamic: dict[str, Any], n: int) -> list[Any]:
    """get_inputs() at size `n` (clipped to each name's bound) along every dynamic dimension: cut where
    `n` is smaller; grown with the inputs of further seeds where it is larger (fresh values, not
    repeats, so a kernel that reads the wrong row cannot pass)."""
    base = make(seed)
    out = list(base)
    extra: list[list[Any]] = []
    for v in dynamic.values():
        want = min(n, v["traced"])
        for pos, d in v["dims"]:
            x = out[pos]
            k = 0
            while x.shape[d] < want:
                if len(extra) <= k:
                    extra.append(make(seed + 7919 * (k + 1)))
                more = extra[k][pos]
                if more.shape != x.shape:  # grown along an earlier dimension: match it by cycling
                    more = _fit(more, x.shape, d)
                x = torch.cat([x, more], dim=d)
                k += 1
            out[pos] = x.narrow(d, 0, want).contiguous()
    return out


def _fit(t: torch.Tensor, shape: torch.Size, keep: int) -> torch.Tensor:
    """`t` brought to `shape` in every dimension but `keep`, cycling its own values."""
    for d, size in enumerate(shape):
        if d != keep and t.shape[d] != size:
            reps = -(-size // t.shape[d])
            t = t.repeat(*[reps if i == d else 1 for i in range(t.dim())]).narrow(d, 0, size)
    return t
