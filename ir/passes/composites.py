"""Decomposition of composite ops into primitives (the same functions the interpreter runs)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..decompose import GraphEmitter, decomposition_for
from ..graph import Graph, Node, read_through
from ..ops import opdef
from .base import Firing, Trace, register


@register
@dataclass(frozen=True)
class Decompose:
    """Replace composites (all, or those named in `only`, never those in `keep`) by their primitive
    decomposition."""

    name: ClassVar[str] = "decompose"
    only: tuple[str, ...] = ()
    keep: tuple[str, ...] = ()

    def run(self, g: Graph, trace: Trace) -> bool:
        changed = False
        for _ in range(8):  # composites may decompose into composites (attention -> softmax)
            todo = [n for n in g.nodes if opdef(n.op).group == "composite" and (not self.only or n.op in self.only)
                    and n.op not in self.keep]
            if not todo:
                break
            done: dict[Node, Node] = {}
            for n in todo:
                # a composite reading one decomposed before it reads its replacement
                read_through(n, done)
                e = GraphEmitter(g, n.name)
                new = decomposition_for(n.op)(e, list(n.args), n.attrs)
                for c in e.created:
                    c.meta.update({k: v for k, v in n.meta.items() if k == "source"})
                done[n] = new
                trace.record(Firing(self.name, f"decompose-{n.op}", n.name, n.op, f"{len(e.created)} primitives"))
            g.replace_all(done)  # one pass, not one per composite (an unrolled recurrence has thousands)
            g.cleanup()
            changed = True
        return changed
