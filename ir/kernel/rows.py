"""Row fusion: a normalisation (softmax, log-softmax, layer/RMS/group norm, logsumexp, chains of
them) as one kernel per row instead of one kernel per reduction and per multi-use value.

`fuse` keeps a reduction's output out of epilogues that broadcast it back to the row, and stores a
value used twice. For a backend with a row template (the "rownorm" kernel kind) that costs a full
write and read of the tensor per boundary. This pass merges a consumer group with the producer
groups whose every output it alone consumes, when all of them are pointwise ops, movement ops and
value reductions; inside the merged group multi-use values are recomputed. A merge is kept only when
it lowers to kernels whose every reduction depends on row coordinates alone (the pass lowers the
merged group to check), so the lowering never has to undo one. It lives beside the lowering for that
reason.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import ClassVar

from ..graph import Graph, Node
from ..ops import opdef
from ..passes.base import Firing, Trace, register
from ..passes.fusion import Boundary, FusionPlan, Group, fuse
from ..passes.library import LIBRARY_MARK
from ..passes.simplify import reduced_axes
from .analysis import work
from .lower import lower_group, row_kernels

VALUE_REDUCTIONS = ("sum", "mean", "amax", "amin", "prod", "var", "std", "norm")
MAX_REDUCTIONS = 8  # reductions per merged kernel: each is a pass over the row when it is chunked
MERGE_GATE = 4  # a merge may do at most this many times the work of the kernels it replaces


def _row_op(n: Node) -> bool:
    if n.meta.get("split"):  # a reduction split over chunks (ir.passes.split) stays off one-kernel-per-row
        return False
    d = opdef(n.op)
    if d.group in ("unary", "binary", "ternary") or d.group == "movement" and n.op in ("reshape", "expand"):
        return True
    return n.op in VALUE_REDUCTIONS


def _eligible(grp: Group) -> bool:
    return all(_row_op(n) for n in grp.nodes)


def _note(merged: Group) -> str:
    names = ", ".join(f"{p.id} (its epilogue)" if p.epilogue else str(p.id) for p in merged.parts)
    kept = [n.name for p in merged.parts for n in p.outputs if n not in merged.outputs]
    gone = f" (no longer stored: {', '.join('%' + s for s in kept)})" if kept else ""
    return f"row fusion: fusion's groups {names} -> group {merged.id}, one kernel per row{gone}"


def _library_epilogue(grp: Group, users: dict[Node, list[Node]], outputs: set[int]
                      ) -> tuple[Group, Group] | None:
    """(head, tail) where `grp`'s anchor is a library call (a cuBLAS GEMM) and the ops after it are row ops:
    the tail would be a pointwise kernel of its own after the call, storing its value for the row kernel
    that reads it (BERT's residual add and fp32 cast before each layer norm, 12.6 MB written and read
    again at batch 8 x 512); taken into the row kernel, the call's output is read there instead."""
    a = grp.anchor
    if a is None or not a.meta.get(LIBRARY_MARK):
        return None
    position = {id(n): i for i, n in enumerate(grp.nodes)}
    head = [n for n in grp.nodes if n.meta.get(LIBRARY_MARK) or position[id(n)] <= position[id(a)]]
    kept = {id(n) for n in head}
    tail = [n for n in grp.nodes if id(n) not in kept]
    if not tail or not all(_row_op(n) for n in tail):
        return None
    parts = []
    for nodes, anchor in ((head, a), (tail, None)):
        ids = {id(n) for n in nodes}
        part = Group(grp.id, nodes, anchor, weights_only=grp.weights_only, epilogue=anchor is None)
        part.inputs = [x for x in dict.fromkeys(x for n in nodes for x in n.args if x is not None) if id(x) not in ids]
        part.outputs = [n for n in nodes if id(n) in outputs or any(id(u) not in ids for u in users[n])]
        parts.append(part)
    return parts[0], parts[1]


def _strided(n: Node) -> bool:
    """A reduction over an axis with elements after it in memory: each row element a different cache line."""
    return math.prod(n.args[0].type.shape[max(reduced_axes(n), default=-1) + 1:]) > 1  # type: ignore[union-attr]


def fuse_rows(g: Graph, plan: FusionPlan, strided: bool = True) -> FusionPlan:
    """The plan with row-fusable groups merged (ids renumbered in execution order); each merged group
    keeps the groups it replaced as `parts`, under their old ids. Without `strided`, rows reduced across
    a strided axis stay split (a backend whose row kernel would gather them: the split reduction and
    pointwise kernels run along the contiguous axis)."""
    users = g.users()
    outputs = {id(o) for o in g.outputs}
    groups = list(plan.groups)
    where = {id(n): grp for grp in groups for n in grp.nodes}
    merges: list[Group] = []
    position = {id(n): i for i, n in enumerate(g.nodes)}
    works: dict[int, int] = {}  # a group lowered on its own: its kernels' work (asked once per group)

    def part_work(p: Group) -> int:
        if id(p) not in works:
            works[id(p)] = sum(map(work, lower_group(g, p)))
        return works[id(p)]

    for consumer in reversed(plan.groups):
        if consumer not in groups or not _eligible(consumer) or len(consumer.outputs) != 1:
            continue
        region = {id(n) for n in consumer.nodes}
        parts = [consumer]
        heads: dict[int, tuple[Group, Group]] = {}  # library calls' groups whose epilogue a part is
        grown = True
        while grown:
            grown = False
            producers = {id(where[id(a)]): where[id(a)] for n in (m for p in parts for m in p.nodes)
                         for a in n.args if a is not None and id(a) in where and id(a) not in region}
            for p in producers.values():
                if p not in groups or p.rows or id(p) in heads:
                    continue
                part, head = p, None
                if not _eligible(p):  # a library call's epilogue may join the row kernel; the call stays
                    split = _library_epilogue(p, users, outputs)
                    if split is None:
                        continue
                    head, part = split
                consumed_here = all(id(o) not in outputs and all(id(u) in region for u in users[o])
                                    for o in part.outputs)
                reds = sum(n.op in VALUE_REDUCTIONS for q in parts + [part] for n in q.nodes)
                if consumed_here and reds <= MAX_REDUCTIONS:
                    parts.append(part)
                    region |= {id(n) for n in part.nodes}
                    grown = True
                    if head is not None:
                        heads[id(p)] = (p, head)
        if len(parts) == 1 or not any(n.op in VALUE_REDUCTIONS for p in parts for n in p.nodes):
            continue
        if not strided and any(_strided(n) for p in parts for n in p.nodes if n.op in VALUE_REDUCTIONS):
            continue
        parts.sort(key=lambda p: p.id)
        nodes = sorted((n for p in parts for n in p.nodes), key=lambda n: position[id(n)])
        anchor = next(n for n in nodes if n.op in VALUE_REDUCTIONS)
        merged = Group(consumer.id, nodes, anchor, [], list(consumer.outputs), all(p.weights_only for p in parts),
                       rows=True, parts=parts)
        merged.inputs = [a for a in dict.fromkeys(a for n in merged.nodes for a in n.args if a is not None)
                         if id(a) not in region]
        lowered = lower_group(g, merged)
        if not row_kernels(lowered):
            continue  # a reduction would depend on a column coordinate (reductions over two axes)
        merged_work = sum(work(replace(k, kind="rownorm")) for k in lowered)  # as the row template runs it
        if merged_work > MERGE_GATE * sum(part_work(p) for p in parts):
            # a row that is not one (a group norm's group index read through a reshape makes every
            # element its own row): the merge would recompute the reductions per element
            continue
        for p, head in heads.values():  # the call stays where it was, without its epilogue
            p.nodes, p.inputs, p.outputs = head.nodes, head.inputs, head.outputs
        take(merged, groups, where, merges)
    if not merges:
        return plan
    return replan(plan, groups, merges, _note)


def take(merged: Group, groups: list[Group], where: dict[int, Group], merges: list[Group]) -> None:
    """`merged` in place of its parts, in the group list and the node -> group map."""
    for p in merged.parts:
        if not p.epilogue:  # a library call's epilogue: its call's group stays
            groups.remove(p)
    groups.append(merged)
    for n in merged.nodes:
        where[id(n)] = merged
    merges.append(merged)


def replan(plan: FusionPlan, groups: list[Group], merges: list[Group],
           note: Callable[[Group], str]) -> FusionPlan:
    """The plan over `groups` (merged ones in place of their parts): ids renumbered in execution order,
    boundaries inside a merged group dropped, a note per merge."""
    groups.sort(key=lambda grp: grp.id)
    renum = {grp.id: i for i, grp in enumerate(groups)}
    new_of = {p.id: m for m in merges for p in m.parts}  # parts keep their old ids
    bounds: list[Boundary] = []
    for b in plan.boundaries:
        pg = new_of.get(b.producer)
        cg = new_of.get(b.consumer)
        if pg is not None and pg is cg:
            continue  # inside a merged group now
        pid = renum[pg.id] if pg is not None else renum[b.producer]
        cid = renum[cg.id] if cg is not None else renum[b.consumer]
        bounds.append(Boundary(pid, cid, b.value, b.reason))
    for grp in groups:
        grp.id = renum[grp.id]
    bounds = sorted(set(bounds), key=lambda b: (b.producer, b.consumer, b.value))
    return FusionPlan(groups, bounds, plan.notes + [note(m) for m in sorted(merges, key=lambda m: m.id)])


@register
@dataclass(frozen=True)
class FuseRows:
    """Row fusion of the plan `fuse` made (or of a fresh one): sets `g.plan`."""

    name: ClassVar[str] = "rows"
    strided: int = 1  # 0: rows reduced across a strided axis stay split kernels

    def run(self, g: Graph, trace: Trace) -> bool:
        return replan_pass(self.name, "merge-rows", functools.partial(fuse_rows, strided=bool(self.strided)), g,
                           trace)


def replan_pass(name: str, rule: str, merge: Callable[[Graph, FusionPlan], FusionPlan], g: Graph,
                trace: Trace) -> bool:
    """A plan pass's run: `merge` applied to the current plan (fusion's, when none yet), each merge traced."""
    before = g.plan or fuse(g)
    g.plan = merge(g, before)
    for note in g.plan.notes[len(before.notes):]:
        trace.record(Firing(name, rule, g.outputs[0].name if g.outputs else g.name, "groups", note))
    return False  # the graph itself is unchanged
