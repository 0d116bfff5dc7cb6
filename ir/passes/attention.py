"""Attention a program writes out, `softmax(Q @ K^T * c + B, -1) @ V`, as the `attention` composite (what
torch's `scaled_dot_product_attention` lifts to), so a plan may leave it whole to the library or to an
attention template instead of two GEMMs around a stored score tensor (inductor rewrites the same chains).

The composite keeps the program's meaning: `nan_rows` says a query whose every score is -inf answers NaN, as
the written softmax does (torch's attention answers 0). The scale is the program's multiplier, or the
reciprocal of its divisor (one rounding apart). Grouped-query chains (K, V with fewer heads) are left alone.
"""

from __future__ import annotations

from ..graph import Node
from .base import P, Rewriter, Rule, X


def _single(r: Rewriter, n: Node) -> bool:
    """Read once, by the chain, and not a graph output."""
    return r.uses(n) == 1 and not any(o is n for o in r.g.outputs)


def _number(n: Node | None) -> float | None:
    if n is not None and n.op == "scalar" and isinstance(n.attrs["value"], (int, float)):
        return float(n.attrs["value"])
    return None


def _key_of(kt: Node) -> tuple[Node, list[int]] | None:
    """(X, dims) where `kt` is K^T and K is X permuted by `dims` (K^T is a permutation of X whose last two
    axes, swapped back, give K: torch's transposes of a head split compose into one permutation)."""
    if kt.op != "permute" or kt.type.rank < 3 or kt.args[0] is None:
        return None
    dims = list(kt.attrs["dims"])
    return kt.args[0], dims[:-2] + [dims[-1], dims[-2]]


def _scores(r: Rewriter, s: Node | None) -> tuple[Node, tuple[Node, list[int]], float] | None:
    """Q, K (as `_key_of` gives it) and the scale where `s` is Q @ K^T, times or divided by a number."""
    scale = 1.0
    if s is not None and s.op in ("mul", "div") and _single(r, s):
        c, x = _number(s.args[1]), s.args[0]
        if c is None and s.op == "mul":
            c, x = _number(s.args[0]), s.args[1]
        if c is None or c == 0.0:
            return None
        scale, s = (c if s.op == "mul" else 1.0 / c), x
    if s is None or s.op != "matmul" or not _single(r, s) or s.args[1] is None:
        return None
    q, key = s.args[0], _key_of(s.args[1])
    return (q, key, scale) if q is not None and key is not None else None


def _attention(r: Rewriter, b: dict[str, Node]) -> Node | None:
    """The rewrite of `WRITTEN_ATTENTION` (None where the chain is not attention's)."""
    sm, v = b["sm"], b["v"]
    if sm.attrs["dim"] % sm.type.rank != sm.type.rank - 1 or not _single(r, sm):
        return None
    s, bias = sm.args[0], None
    found = _scores(r, s)
    if found is None and s is not None and s.op == "add" and _single(r, s):
        for scores, other in ((s.args[0], s.args[1]), (s.args[1], s.args[0])):
            found = _scores(r, scores)
            if found is not None:
                bias = other
                break
    if found is None or v is None:
        return None
    q, (x, kdims), scale = found
    qs, vs = q.type.shape, v.type.shape
    ks = [x.type.shape[d] for d in kdims]
    if not (len(qs) == len(ks) == len(vs) >= 3 and list(qs[:-2]) == list(ks[:-2]) == list(vs[:-2])
            and qs[-1] == ks[-1] and ks[-2] == vs[-2]) or not (q.type.dtype == x.type.dtype == v.type.dtype):
        return None
    if bias is not None and (bias.type.dtype != q.type.dtype or bias.type.rank > len(qs)):
        return None
    k = x if kdims == list(range(len(kdims))) else r.op("permute", [x], dims=kdims)
    args = [q, k, v] + ([bias] if bias is not None else [])
    return r.op("attention", args, scale=scale, causal=False, nan_rows=True)


# one of the algebraic rules (`simplify`): the first simplify runs before composites are decomposed and
# before translate reads which op families (attention among them) a plan may leave to the library
WRITTEN_ATTENTION = Rule("written-attention", P("matmul", P("softmax", bind="sm"), X("v")), _attention)
