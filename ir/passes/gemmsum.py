"""A sum of GEMMs that share their output shape as one GEMM over the concatenated inner dimension.

A recurrence's weight gradient is one outer product per step, added up: the backward graph of a GRU over 128
steps holds 128 `[1536, 2] x [2, 512]` products chained by adds, each product and each add writing the whole
[1536, 512] gradient again. `sum_i A_i B_i` is `[A_1 ... A_n] [B_1; ...; B_n]`: one GEMM with K = 256 that
writes the gradient once. Exact in real arithmetic (the same products, summed in another order); the
verifier checks the order's rounding against float64 as it does any other."""

from __future__ import annotations

from collections.abc import Callable

from ..graph import Graph, Node
from .base import Rewriter

MIN_TERMS = 2


def annotate_sums(g: Graph) -> None:
    """Marks each add whose only use is an add of its shape (`_in_sum`): a sum's inner node, left to the
    rewrite of the sum's top."""
    for n, us in g.users().items():
        if (n.op == "add" and len(us) == 1 and us[0].op == "add" and not any(o is n for o in g.outputs)
                and all(a is not None and list(a.shape) == list(n.shape) for a in us[0].args)):
            n.meta["_in_sum"] = True  # (an add of a broadcast bias is a sum's top, not part of it)


def _product(n: Node, uses: int) -> tuple[Node, Node] | None:
    """(A, B) of a 2-D GEMM `n` used once (`uses`: its users)."""
    if uses != 1:
        return None
    if n.op == "matmul" and all(a is not None and a.type.rank == 2 for a in n.args):
        return n.args[0], n.args[1]  # type: ignore[return-value]
    return None


def gemm_over_sum(r: Rewriter, uses: Callable[[Node], int]) -> Node | None:
    """The rewrite at the top add of a sum (see the module text); `uses(n)`: how many users `n` has."""
    root = r.root
    if root.meta.get("_in_sum") or root.type.rank != 2:
        return None
    leaves: list[Node] = []
    stack = [root]
    while stack:
        n = stack.pop()
        if n.op == "add" and (n is root or n.meta.get("_in_sum")) and all(
                a is not None and list(a.shape) == list(root.shape) for a in n.args):
            stack.extend(reversed([a for a in n.args if a is not None]))
        else:
            leaves.append(n)
    terms, rest = [], []
    for leaf in leaves:
        got = None
        if leaf.op == "permute" and list(leaf.attrs["dims"]) == [1, 0] and uses(leaf) == 1 and leaf.args[0] is not None:
            inner = _product(leaf.args[0], uses(leaf.args[0]))
            if inner is not None:  # (A B)^T = B^T A^T
                got = (r.op("permute", [inner[1]], dims=[1, 0]), r.op("permute", [inner[0]], dims=[1, 0]))
        else:
            got = _product(leaf, uses(leaf))
        (terms if got is not None else rest).append(got if got is not None else leaf)
    if len(terms) < MIN_TERMS or len({a.type.dtype for a, _ in terms} | {b.type.dtype for _, b in terms}) != 1:
        return None
    out = r.op("matmul", [r.op("concat", [a for a, _ in terms], dim=1), r.op("concat", [b for _, b in terms], dim=0)])
    for other in rest:
        out = r.op("add", [out, other])
    return out
