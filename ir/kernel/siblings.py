"""Sibling outputs in one kernel: where one kernel's value is computed inside another's of the same
shape (the mean that a variance subtracts, the sum inside a mean, the maximum inside a log-sum-exp), the
larger kernel stores it too (`Kernel.also`) and the smaller one is gone, so the input is read once.
`torch.var_mean` lowered as two reductions read its input twice; eager reads it once."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from .analysis import same_renamed
from .ir import Expr, Kernel, LibraryCall, Var, free_vars, walk

KINDS = ("reduce",)  # kernels whose templates store `also` (a row of values per output element)


def _inside(a: Kernel, b: Kernel) -> Expr | None:
    """The node of `a`'s value that computes `b`'s value at `a`'s coordinates, or None."""
    if len(a.coords) != len(b.coords) or any(x.extent != y.extent for x, y in zip(a.coords, b.coords)):
        return None
    ren = {y.name: x.name for x, y in zip(a.coords, b.coords)}
    coords, memo = {v.name for v in a.coords}, {}
    for node in walk(a.expr):  # children first: the smallest match (a shared node is printed once)
        if isinstance(node, Var) or not free_vars(node, memo) <= coords:
            continue
        if same_renamed(node, b.expr, ren):
            return node
    return None


def _reads(step: Kernel | LibraryCall, name: str) -> bool:
    if isinstance(step, Kernel):
        return any(buf.name == name for buf in step.inputs())
    return any(a is not None and a.name == name for a in step.args)


def merge_siblings(steps: Sequence[Kernel | LibraryCall]) -> list[Kernel | LibraryCall]:
    """`steps` with every kernel whose value another kernel of the same shape computes on the way
    folded into that kernel as one more output (at the larger kernel's place: a step between them that
    reads the smaller one's output keeps the two apart)."""
    out = list(steps)
    i = 0
    while i < len(out):
        a = out[i]
        if isinstance(a, Kernel) and a.kind in KINDS and a.reductions():
            for j, b in enumerate(out):
                if j == i or not isinstance(b, Kernel) or b.kind not in KINDS or b.also or b.out.shape != a.out.shape \
                        or not b.reductions():
                    continue
                if j < i and any(_reads(s, b.out.name) for s in out[j + 1:i]):
                    continue
                node = _inside(a, b)
                if node is None:
                    continue
                a = out[i] = replace(a, also=a.also + ((b.out, node),))
                del out[j]
                if j < i:
                    i -= 1
                break
            else:
                i += 1
            continue
        i += 1
    return out
