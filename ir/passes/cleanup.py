"""Dead code, CSE, constant folding and canonicalisation."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..graph import Graph, Node, read_through
from ..interp import EvalCtx, eval_op
from ..ops import opdef
from .base import Firing, P, RewritePass, Rewriter, Rule, Trace, X, register

IMPURE = ("dropout", "random", "opaque")  # random or unknown: never merged or folded


@register
@dataclass(frozen=True)
class DeadCode:
    name: ClassVar[str] = "dce"

    def run(self, g: Graph, trace: Trace) -> bool:
        before = {n.name for n in g.nodes}
        dropped = g.cleanup()
        for name in sorted(before - {n.name for n in g.nodes}):
            trace.record(Firing(self.name, "dead-value", name, "unused", "removed"))
        return dropped > 0


@register
@dataclass(frozen=True)
class CommonSubexpr:
    name: ClassVar[str] = "cse"

    def run(self, g: Graph, trace: Trace) -> bool:
        seen: dict[tuple, Node] = {}
        same: dict[Node, Node] = {}  # replaced -> its first equal: each node reads through it before its key
        for n in list(g.nodes):
            read_through(n, same)
            if n.op in ("input", "param") + IMPURE:
                continue
            k = n.key()
            first = seen.get(k)
            if first is None:
                seen[k] = n
                continue
            same[n] = first
            trace.record(Firing(self.name, "same-value", n.name, n.op, f"%{first.name}"))
        if same:
            g.replace_all(same)  # the outputs (the nodes' arguments are already read through)
            g.cleanup()
        return bool(same)


def is_const(n: Node | None) -> bool:
    return n is not None and n.op in ("scalar", "full")


@register
@dataclass(frozen=True)
class ConstantFold:
    """Evaluates ops whose operands are all constants; keeps the result only when it is a
    scalar or a uniform fill, so no tensor data enters the graph."""

    name: ClassVar[str] = "fold"

    def run(self, g: Graph, trace: Trace) -> bool:
        folded: dict[Node, Node] = {}  # replaced -> its constant: each node reads through it first
        for n in list(g.nodes):
            read_through(n, folded)
            d = opdef(n.op)
            if d.group in ("source", "opaque") or n.op in IMPURE or not n.args:
                continue
            if not all(is_const(a) for a in n.args):
                continue
            vals = [eval_op(a.op, [], a.attrs, EvalCtx()) for a in n.args]  # type: ignore[union-attr]
            out = eval_op(n.op, vals, n.attrs, EvalCtx())
            flat = out.reshape(-1)
            if flat.numel() == 0 or not bool((flat == flat[0]).all()):
                continue
            v = flat[0].item()
            attrs = {"value": v, "dtype": n.dtype}
            new = (g.add("scalar", [], attrs, name=f"{n.name}_c") if n.type.rank == 0 else
                   g.add("full", [], dict(attrs, shape=list(n.shape)), name=f"{n.name}_c"))
            folded[n] = new
            trace.record(Firing(self.name, "fold-constant", n.name, n.op, f"{new.op}({v!r})"))
        if folded:
            g.replace_all(folded)
            g.cleanup()
        return bool(folded)


# --- canonicalisation rules: identities that never change a value
def _same_type(a: Node, b: Node) -> bool:
    return a.type.shape == b.type.shape and a.type.dtype == b.type.dtype


def _identity_if_same(r: Rewriter, b: dict[str, Node]) -> Node | None:
    return b["x"] if _same_type(b["x"], r.root) else None


def _merge_reshapes(r: Rewriter, b: dict[str, Node]) -> Node | None:
    x = b["x"]
    return x if list(x.shape) == list(r.root.shape) else r.op("reshape", [x], shape=list(r.root.shape))


def _merge_permutes(r: Rewriter, b: dict[str, Node]) -> Node | None:
    inner, outer = b["inner"].attrs["dims"], r.root.attrs["dims"]
    dims = [inner[d] for d in outer]
    return b["x"] if dims == sorted(dims) else r.op("permute", [b["x"]], dims=dims)


def _hardtanh_to_clamp(r: Rewriter, b: dict[str, Node]) -> Node:
    at = r.root.attrs
    return r.op("clamp", [b["x"]], min=at["min_val"], max=at["max_val"])


def _flip_scan_flip(r: Rewriter, b: dict[str, Node]) -> Node | None:
    outer, scan, inner = r.root, b["scan"], b["inner"]
    d = scan.attrs["dim"]
    if outer.attrs["dims"] != (d,) or inner.attrs["dims"] != (d,):
        return None
    return r.op(scan.op, [b["x"]], dim=d, reverse=not scan.attrs["reverse"], exclusive=scan.attrs["exclusive"])


CANONICAL_RULES = (
    Rule("reshape-noop", P("reshape", X("x")), _identity_if_same),
    Rule("expand-noop", P("expand", X("x")), _identity_if_same),
    Rule("cast-noop", P("cast", X("x")), _identity_if_same),
    Rule("permute-noop", P("permute", X("x"), where=lambda n: list(n.attrs["dims"]) == sorted(n.attrs["dims"])),
         _identity_if_same),
    Rule("reshape-reshape", P("reshape", P("reshape", X("x"))), _merge_reshapes),
    Rule("permute-permute", P("permute", P("permute", X("x"), bind="inner")), _merge_permutes),
    Rule("hardtanh-is-clamp", P("hardtanh", X("x")), _hardtanh_to_clamp),
    Rule("flip-scan-flip", P("flip", P(("cumsum", "cumprod"), P("flip", X("x"), bind="inner"), bind="scan")),
         _flip_scan_flip),
    Rule("neg-neg", P("neg", P("neg", X("x"))), _identity_if_same),
)


@register
@dataclass(frozen=True)
class Canonicalize(RewritePass):
    name: ClassVar[str] = "canonicalize"
    rules: ClassVar[tuple[Rule, ...]] = CANONICAL_RULES


