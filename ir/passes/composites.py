"""Decomposition of composite ops into primitives (the same functions the interpreter runs)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..decompose import DECOMPOSITIONS, GraphEmitter
from ..graph import Graph
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
            for n in todo:
                e = GraphEmitter(g, n.name)
                new = DECOMPOSITIONS[n.op](e, list(n.args), n.attrs)
                for c in e.created:
                    c.meta.update({k: v for k, v in n.meta.items() if k == "source"})
                g.replace_uses(n, new)
                trace.record(Firing(self.name, f"decompose-{n.op}", n.name, n.op, f"{len(e.created)} primitives"))
            g.cleanup()
            changed = True
        return changed
