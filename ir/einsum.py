"""Lowering of `einsum` into sums, permutes, reshapes and one batched `matmul` per operand pair."""

from __future__ import annotations

import math

from .errors import AkgError
from .graph import Node


def _permute(cx, x: Node, src: str, dst: str) -> Node:
    if src == dst:
        return x
    return cx.add("permute", [x], dims=[src.index(c) for c in dst])


def _reshape(cx, x: Node, shape: list[int]) -> Node:
    return x if list(x.shape) == shape else cx.add("reshape", [x], shape=shape)


def _sum_out(cx, x: Node, letters: str, keep: set[str]) -> tuple[Node, str]:
    drop = [i for i, c in enumerate(letters) if c not in keep]
    if not drop:
        return x, letters
    x = cx.add("sum", [x], dims=drop, keepdim=False)
    return x, "".join(c for c in letters if c in keep)


def _pair(cx, a: Node, la: str, b: Node, lb: str, out: str) -> tuple[Node, str]:
    size = {c: d for c, d in zip(la, a.shape)} | {c: d for c, d in zip(lb, b.shape)}
    a, la = _sum_out(cx, a, la, set(lb) | set(out))
    b, lb = _sum_out(cx, b, lb, set(la) | set(out))
    batch = [c for c in la if c in lb and c in out]
    contr = [c for c in la if c in lb and c not in out]
    afree = [c for c in la if c not in lb]
    bfree = [c for c in lb if c not in la]
    prod = lambda cs: math.prod(size[c] for c in cs)  # noqa: E731
    bt = [prod(batch)] if batch else []
    a2 = _reshape(cx, _permute(cx, a, la, "".join(batch + afree + contr)), bt + [prod(afree), prod(contr)])
    b2 = _reshape(cx, _permute(cx, b, lb, "".join(batch + contr + bfree)), bt + [prod(contr), prod(bfree)])
    mm = cx.add("matmul", [a2, b2])
    res = "".join(batch + afree + bfree)
    return _reshape(cx, mm, [size[c] for c in res]), res


def lower_einsum(cx, eq: str, operands: list[Node]) -> Node:
    if "..." in eq or "->" not in eq:
        raise AkgError(f"einsum {eq!r}: only explicit equations without '...' are supported")
    lhs, out = eq.split("->")
    terms = lhs.split(",")
    if len(terms) != len(operands) or any(len(set(t)) != len(t) for t in terms):
        raise AkgError(f"einsum {eq!r}: repeated (diagonal) indices are not supported")
    x, lx = operands[0], terms[0]
    if len(operands) == 1:
        x, lx = _sum_out(cx, x, lx, set(out))
    for i in range(1, len(operands)):
        later = set(out).union(*terms[i + 1:])
        x, lx = _pair(cx, x, lx, operands[i], terms[i], "".join(sorted(later)))
    return _permute(cx, x, lx, out)
