"""Attention as one kernel: softmax(S) @ V with S = f(Q @ K^T) (scale, causal or added masks) computed
tile by tile with a running maximum and sum (the flash-attention recurrence), so the score matrix is
never stored. Fusion and row fusion leave attention as three groups (the scores GEMM with its
epilogue, the row-fused softmax, the P @ V GEMM), each storing an n x n tensor. For a backend with an
"attention" template this pass merges them (with the movement and pointwise groups that feed only them:
a K^T permute, a grouped-query expansion, a rotary embedding); the merged group lowers to one kernel
whose value is the plain nested expression

    out[b, i, d] = dot_j( exp(S[b, i, j] - M[b, i]) / L[b, i] * V[b, j, d] )
    M = max_j' S[b, i, j'],  L = sum_j'' exp(S[b, i, j''] - M)

(under a mask, P is guarded: 0 on a query whose every score is -inf, as torch's attention answers),
which the kernel interpreter evaluates as it stands; `analysis.split_attention` takes it apart for
templates and refuses anything else, so a merge is kept only where the template can run it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar

from ..errors import UnsupportedKernel
from ..graph import Graph
from ..passes.base import Trace, register
from ..passes.fusion import FusionPlan, Group
from ..passes.library import LIBRARY_MARK
from .analysis import split_attention
from .ir import Kernel
from .lower import lower_group
from .rows import replan, replan_pass, take


def _movement(grp: Group) -> bool:
    return all(n.op in ("permute", "reshape", "expand", "contiguous", "transpose") for n in grp.nodes)


def _passed_view(grp: Group) -> bool:
    """A view the library pass marked to be passed to a library GEMM in place (its own group)."""
    return _movement(grp) and all(n.meta.get(LIBRARY_MARK) for n in grp.nodes)


def fuse_attention(g: Graph, plan: FusionPlan) -> FusionPlan:
    """The plan with each scores-GEMM -> softmax rows -> P @ V chain merged into one group."""
    users = g.users()
    outputs = {id(o) for o in g.outputs}
    groups = list(plan.groups)
    where = {id(n): grp for grp in groups for n in grp.nodes}
    merges: list[Group] = []
    position = {id(n): i for i, n in enumerate(g.nodes)}

    def producers(parts: list[Group], region: set[int]) -> list[Group]:
        found = {id(where[id(a)]): where[id(a)] for p in parts for n in p.nodes for a in n.args
                 if a is not None and id(a) in where and id(a) not in region}
        return list(found.values())

    def only_here(p: Group, region: set[int]) -> bool:
        return all(id(o) not in outputs and all(id(u) in region for u in users[o]) for o in p.outputs)

    for pv in reversed(plan.groups):
        if pv not in groups or pv.kind != "contraction" or pv.rows or len(pv.outputs) != 1:
            continue
        region = {id(n) for n in pv.nodes}
        parts, core = [pv], [pv]
        for want in ("rows", "contraction"):  # the softmax, then the scores GEMM, each feeding only the last
            last: list[Group] = core[-1:]
            while True:
                near = [p for p in producers(last, region) if p in groups and only_here(p, region)]
                found = [p for p in near if (p.rows if want == "rows" else p.kind == "contraction" and not p.rows)]
                views = [p for p in near if _passed_view(p)]
                if len(found) == 1 or not views:
                    break
                parts += views  # a view a library strategy passed to the GEMM: read through, as any view
                region |= {id(n) for p in views for n in p.nodes}
                last = views
            if len(found) != 1:
                break
            parts.append(found[0])
            core.append(found[0])
            region |= {id(n) for n in found[0].nodes}
        if len(core) != 3:
            continue
        # what Q, K^T and V are read through, each group feeding only the attention: a permute, a grouped-query
        # head expansion, a rotary embedding (pointwise: computed per tile as it loads, never stored); past a
        # view passed to the library, what it views too
        last = parts
        while last:
            took = [p for p in producers(last, region) if p in groups and only_here(p, region) and
                    (_movement(p) or p.kind == "pointwise" and not p.rows and not p.flash)]
            parts += took
            region |= {id(n) for p in took for n in p.nodes}
            last = [p for p in took if _passed_view(p)]
        parts.sort(key=lambda p: p.id)
        nodes = sorted((n for p in parts for n in p.nodes), key=lambda n: position[id(n)])
        merged = Group(pv.id, nodes, pv.anchor, [], list(pv.outputs), all(p.weights_only for p in parts),
                       parts=parts, flash=True)
        merged.inputs = [a for a in dict.fromkeys(a for n in merged.nodes for a in n.args if a is not None)
                         if id(a) not in region]
        # GEMMs (and views) a library strategy marked stay generated here: one kernel that never stores the
        # scores, where two library GEMMs would store them between (`--library gemm` means GEMMs, not the
        # products of an attention; a composite attention is the "attention" family's)
        marked = [n for n in merged.nodes if n.meta.pop(LIBRARY_MARK, False)]
        lowered = lower_group(g, merged)
        try:
            if len(lowered) != 1 or not isinstance(lowered[0], Kernel):
                raise UnsupportedKernel("more than one kernel")
            split_attention(replace(lowered[0], kind="attention"))
        except UnsupportedKernel:
            for n in marked:
                n.meta[LIBRARY_MARK] = True
            continue
        take(merged, groups, where, merges)
    if not merges:
        return plan
    return replan(plan, groups, merges, lambda m: "attention fusion: fusion's groups "
                  f"{', '.join(str(p.id) for p in m.parts)} -> group {m.id}, one kernel (scores never stored)")


@register
@dataclass(frozen=True)
class FuseAttention:
    """Attention fusion of the current plan (after row fusion): sets `g.plan`."""

    name: ClassVar[str] = "flash"

    def run(self, g: Graph, trace: Trace) -> bool:
        return replan_pass(self.name, "merge-attention", fuse_attention, g, trace)
