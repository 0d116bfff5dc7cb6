"""Reshapes moved toward the outputs (`sinkreshapes`), and an output that is a reshape of a computed value
returned as a view of it.

A softmax over x viewed as [B, H, T] that is scaled and returned as [B, H*T] has its scale and the final
reshape in the output's coordinates, where a row is `j // T`: row fusion cannot make the softmax one
kernel per row, and three kernels run. With the reshape moved past the pointwise ops that follow it (a
scalar, or an input or parameter that stays a strided read in the new coordinates), the whole chain runs
in the [B, H, T] coordinates, and the final reshape, a graph output, is a torch view of that kernel's
output (no cost: kernel outputs are contiguous), not a copy kernel or an epilogue that moves the
coordinates. A per-channel weight seen per flat group ([N, G, C/G*H*W], a group norm written by hand) is not
a strided read; it stays (nn.GroupNorm is decomposed in [N, G, C/G, H*W], where it is one).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..graph import Graph, Node
from ..ops import opdef
from .base import Firing, P, RewritePass, Rewriter, Rule, Trace, register
from .library import LIBRARY_MARK, is_view
from .strides import contiguous, expand_strides, reshape_strides, view_strides

SOURCES = ("input", "param")


def _computed(n: Node | None) -> bool:
    """A value a kernel stores contiguous (not an input, a constant or a view of something else)."""
    return n is not None and n.op not in (*SOURCES, "scalar", "full", "arange") and opdef(n.op).group != "movement"


def _strided_at(a: Node, full: tuple[int, ...], shape: tuple[int, ...]) -> bool:
    """`a` (an input or parameter, or a view of one) broadcast to `full` and viewed as `shape` is still a
    strided read. A per-channel weight seen per flat group is not (`w[(g*L + j) // (H*W)]`):
    read per element in a row loop it is a gather, measured twice as slow on the CPU as the plan it
    would replace, so the reshape stays."""
    got = (a, contiguous(a.type.shape)) if a.op in SOURCES else view_strides(a, SOURCES)
    return got is not None and reshape_strides(full, expand_strides(a.type.shape, got[1], full), shape) is not None


def _sink(r: Rewriter, b: dict[str, Node]) -> Node | None:
    n = r.root
    if opdef(n.op).group not in ("unary", "binary"):
        return None
    rs = next((a for a in n.args if a is not None and a.op == "reshape" and a.type.shape == n.type.shape
               and _computed(a.args[0]) and not a.meta.get(LIBRARY_MARK)), None)
    # its uses counted only where a candidate is found: this rule sees every node
    if rs is None or rs.args[0] is None or r.uses(rs) != 1:
        return None
    y = rs.args[0]
    args: list[Node | None] = []
    for a in n.args:
        if a is None or a is rs:
            args.append(y if a is rs else None)
        elif a.type.numel == 1:  # a scalar broadcast: the same at any shape of the rank it is used at
            args.append(a if a.type.rank == 0 else r.op("reshape", [a], shape=[1] * y.type.rank))
        elif _strided_at(a, n.type.shape, y.type.shape):  # read in place through the new view
            full = a if a.type.shape == n.type.shape else r.op("expand", [a], shape=list(n.type.shape))
            args.append(r.op("reshape", [full], shape=list(y.type.shape)))
        else:  # a computed operand would be stored at full size to be viewed
            return None
    moved = r.op(n.op, args, **n.attrs)
    return r.op("reshape", [moved], shape=list(n.type.shape))


@register
@dataclass(frozen=True)
class SinkReshapes(RewritePass):
    """Reshapes of computed values moved past the pointwise ops after them (see the module text), then each
    graph output that is a reshape of a computed value marked a library call: a torch view."""

    name: ClassVar[str] = "sinkreshapes"
    rules: ClassVar[tuple[Rule, ...]] = (Rule("reshape-past-pointwise", P(None), _sink),)

    def run(self, g: Graph, trace: Trace) -> bool:
        changed = self.apply(self.rules, g, trace)
        for o in g.outputs:
            if o.op == "reshape" and is_view(o) and _computed(o.args[0]) and not o.meta.get(LIBRARY_MARK):
                o.meta[LIBRARY_MARK] = True
                trace.record(Firing(self.name, "output-as-view", o.name, "reshape kernel", "torch view"))
                g.plan = None
                changed = True
        return changed
