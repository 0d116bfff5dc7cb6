"""Fusion into kernel groups: pointwise chains; reductions with pointwise prologue and epilogue;
a contraction with its pointwise epilogue; windows and scans with epilogues.

Greedy over the topological order, so the result is deterministic. Every edge between two
groups carries the reason it is a boundary. The group graph is kept acyclic with networkx.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any, ClassVar

import networkx as nx

from ..graph import Graph, Node
from ..ops import opdef
from .base import Firing, Trace, register
from .library import LIBRARY_MARK, library_op
from .strides import VIEW_OPS, view_strides

SOURCES = ("input", "param", "scalar", "full", "arange")
ANCHORS = ("reduction", "contraction", "window", "scan", "composite", "opaque")
PROLOGUE_OK = ("reduction", "window", "scan", "composite")  # contractions take raw operands


def in_place_view(v: Node, grp: Group, transposed: int = 0) -> bool:
    """`v` is a view of an input or parameter (its group nothing but that chain) whose innermost axis is
    the source's: a GEMM reads it through its own index, as coalesced as the source, instead of a copy
    (split-K's reshaped operands, a batch axis moved). A view that moves the innermost axis (a
    transpose) stays a copy where its elements are wider than `transposed` bytes: GPU GEMM tiles of
    32-bit operands want their K axis contiguous, while tensor cores load 16-bit tiles transposed
    (a backward pass's X^T and P^T, read in place: `transposed=2`), and a backend whose GEMM packs
    both operands itself reads any transpose (`transposed=8`)."""
    got = view_strides(v, ("input", "param"))
    if got is None or any(m.op not in VIEW_OPS for m in grp.nodes):
        return False
    strides = got[1]
    return v.type.itemsize <= transposed or not strides or strides[-1] == 1 or v.type.shape[-1] == 1


def _torch_anchor(grp: Group) -> bool:
    """A group whose anchor is a torch call with an epilogue after it: that epilogue is a kernel of its own
    anyway, so a window or reduction reading it may take it as its prologue (a convolution's batch norm and
    ReLU computed as its max pool loads them: the activation is never stored)."""
    a = grp.anchor
    return a is not None and library_op(a) and len(grp.nodes) > 1


def fusion_kind(n: Node) -> str:
    d = opdef(n.op)
    return d.kind if d.group == "composite" else d.fusion_kind


@dataclass
class Group:
    id: int
    nodes: list[Node] = field(default_factory=list)
    anchor: Node | None = None
    inputs: list[Node] = field(default_factory=list)
    outputs: list[Node] = field(default_factory=list)
    weights_only: bool = False  # reads no graph input: can be computed once when weights load
    rows: bool = False  # merged by row fusion: one kernel per row, multi-use values recomputed
    parts: list[Group] = field(default_factory=list)  # the groups row or attention fusion merged (for reports)
    flash: bool = False  # merged by attention fusion: one kernel, the scores never stored
    epilogue: bool = False  # a part row fusion took from a library call's group (the call's group stays)

    @property
    def kind(self) -> str:
        return fusion_kind(self.anchor) if self.anchor is not None else "pointwise"

    def describe(self) -> str:
        a = f" anchor %{self.anchor.name}" if self.anchor is not None else ""
        ops = ", ".join(n.op for n in self.nodes)
        outs = ", ".join(f"%{o.name}" for o in self.outputs)
        w = " (weights only: precompute once)" if self.weights_only else ""
        kind = f"{self.kind}, rows" if self.rows else "attention" if self.flash else self.kind
        return f"group {self.id} [{kind}]{a}: {ops} -> {outs}{w}"


@dataclass(frozen=True)
class Boundary:
    producer: int
    consumer: int
    value: str
    reason: str

    def __str__(self) -> str:
        return f"boundary g{self.producer} -> g{self.consumer} via %{self.value}: {self.reason}"


@dataclass
class FusionPlan:
    groups: list[Group]
    boundaries: list[Boundary]
    notes: list[str] = field(default_factory=list)  # what later passes did to the plan (row fusion)

    def __str__(self) -> str:
        return "\n".join([g.describe() for g in self.groups] + [str(b) for b in self.boundaries] + self.notes)

    def to_json(self) -> dict[str, Any]:
        return {
            "groups": [{"id": g.id, "kind": g.kind, "anchor": g.anchor.name if g.anchor else None,
                        "nodes": [n.name for n in g.nodes], "inputs": [n.name for n in g.inputs],
                        "outputs": [n.name for n in g.outputs], "weights_only": g.weights_only, "rows": g.rows}
                       for g in self.groups],
            "boundaries": [b.__dict__ for b in self.boundaries],
            "notes": list(self.notes),
        }


def fuse(g: Graph, transposed: int = 0) -> FusionPlan:
    """Kernel groups over `g` (`transposed`: GEMMs read transposed views of inputs with elements of at
    most this many bytes in place, `in_place_view`)."""
    users = g.users()
    outputs = {id(o) for o in g.outputs}
    groups: list[Group] = []
    where: dict[int, Group] = {}  # node id -> group
    dag = nx.DiGraph()
    reasons: dict[tuple[int, int, str], str] = {}

    ids = itertools.count()

    def new_group(n: Node) -> Group:
        grp = Group(next(ids))
        groups.append(grp)
        dag.add_node(grp.id)
        return grp

    def consumers(v: Node) -> int:  # nodes reading v, however many of their operands it is (x * x)
        return len({id(u) for u in users[v]})

    def single_use(v: Node) -> bool:
        return consumers(v) == 1 and id(v) not in outputs

    def creates_cycle(target: Group, others: list[Group]) -> bool:
        # joining `target` means target must also run after every other producer group
        return any(o.id != target.id and nx.has_path(dag, target.id, o.id) for o in others)

    def why_not(n: Node, v: Node, grp: Group, kind: str) -> str | None:
        """None when `n` may join `grp` through its operand `v`; else the boundary's reason."""
        if grp.kind == "opaque" or kind == "opaque":
            return "opaque ops stay in torch"
        if not single_use(v):
            n_users = consumers(v) + (id(v) in outputs)
            return f"%{v.name} is used {n_users} times (materialised once, not recomputed)"
        if kind in ("pointwise", "movement"):
            if kind == "movement" and n.meta.get(LIBRARY_MARK):  # a torch view of the stored value
                return "a torch view of the stored value"
            if n.op == "concat" and v.op == "concat":  # each element would choose among every operand of both
                return "a concat of concats stays a kernel per level"
            if (kind == "movement" and grp.kind == "contraction" and n.type.shape and v.type.shape
                    and n.type.shape[-1] > v.type.shape[-1]):
                # e.g. attention's heads merged back: the GEMM's columns would join its batch (M = N = 1)
                return "a reshape merging dimensions into the contraction's last would leave no GEMM tile"
            if grp.anchor is not None and n.type.numel > grp.anchor.type.numel:
                return "epilogue would broadcast the anchor's output to a larger shape"
            return None
        # n is an anchor
        if grp.anchor is not None and not (kind in ("window", "reduction") and _torch_anchor(grp)):
            return f"one anchor per kernel (%{grp.anchor.name} is {grp.kind})"
        if kind == "contraction":
            return None if in_place_view(v, grp, transposed) else "contraction operands are not fused as prologues"
        if kind not in PROLOGUE_OK:
            return f"{kind} takes no prologue"
        return None

    def can_merge(a: Group, b: Group) -> bool:
        # merging is safe unless one reaches the other through a third group
        for x, y in ((a, b), (b, a)):
            if any(s != y.id and nx.has_path(dag, s, y.id) for s in dag.successors(x.id)):
                return False
        return True

    def merge(into: Group, grp: Group) -> None:
        into.nodes += grp.nodes
        into.anchor = into.anchor or grp.anchor
        for m in grp.nodes:
            where[id(m)] = into
        nx.contracted_nodes(dag, into.id, grp.id, self_loops=False, copy=False)
        for (p, c, v) in list(reasons):
            if grp.id in (p, c):
                r = reasons.pop((p, c, v))
                p2, c2 = (into.id if p == grp.id else p), (into.id if c == grp.id else c)
                if p2 != c2:
                    reasons.setdefault((p2, c2, v), r)
        groups.remove(grp)

    for n in g.nodes:
        if n.op in SOURCES:
            continue
        kind = fusion_kind(n)
        producers = [a for a in n.args if a is not None and a.op not in SOURCES]
        edge_reason: dict[int, str] = {}
        candidates: list[Group] = []
        for v in producers:
            grp = where[id(v)]
            reason = why_not(n, v, grp, kind)
            if reason is not None:
                edge_reason[id(v)] = reason
            elif grp not in candidates:
                candidates.append(grp)
        chosen: Group | None = None
        anchored = kind in ANCHORS
        for grp in candidates:
            prod_groups = [where[id(a)] for a in producers]
            if chosen is None and not creates_cycle(grp, prod_groups):
                chosen = grp
                anchored |= grp.anchor is not None
            elif chosen is not None and not (anchored and grp.anchor is not None) and can_merge(chosen, grp):
                anchored |= grp.anchor is not None
                merge(chosen, grp)
            else:
                for v in producers:
                    if where[id(v)] is grp:
                        edge_reason[id(v)] = ("fusing here would order kernels in a cycle" if chosen is None
                                              else "operand comes from another kernel")
        grp = chosen if chosen is not None else new_group(n)
        grp.nodes.append(n)
        if kind in ANCHORS:
            grp.anchor = n
        where[id(n)] = grp
        for v in producers:
            pg = where[id(v)]
            if pg is not grp:
                dag.add_edge(pg.id, grp.id)
                reasons.setdefault((pg.id, grp.id, v.name), edge_reason.get(id(v), "operand comes from another kernel"))

    position = {id(n): i for i, n in enumerate(g.nodes)}
    reads_input: dict[int, bool] = {}
    for n in g.nodes:
        reads_input[id(n)] = n.op == "input" or any(reads_input[id(a)] for a in n.args if a is not None)
    for grp in groups:
        grp.nodes.sort(key=lambda m: position[id(m)])
        grp.weights_only = not any(reads_input[id(m)] for m in grp.nodes)
    # group inputs/outputs, then renumber groups in execution order
    for grp in groups:
        members = {id(m) for m in grp.nodes}
        seen: set[int] = set()
        for m in grp.nodes:
            for a in m.args:
                if a is not None and id(a) not in members and id(a) not in seen:
                    seen.add(id(a))
                    grp.inputs.append(a)
        grp.outputs = [m for m in grp.nodes if id(m) in outputs or any(id(u) not in members for u in users[m])]
    order = list(nx.lexicographical_topological_sort(dag, key=lambda i: i))
    renum = {old: new for new, old in enumerate(order)}
    for grp in groups:
        grp.id = renum[grp.id]
    groups.sort(key=lambda grp: grp.id)
    bounds = [Boundary(renum[p], renum[c], v, r) for (p, c, v), r in reasons.items()]
    bounds.sort(key=lambda b: (b.producer, b.consumer, b.value))
    return FusionPlan(groups, bounds)


def to_dot(g: Graph, plan: FusionPlan | None = None) -> str:
    lines = [f'digraph "{g.name}" {{', "  node [shape=box, fontname=monospace];"]
    grouped = {id(n): grp for grp in (plan.groups if plan else []) for n in grp.nodes}
    for grp in plan.groups if plan else []:
        lines.append(f'  subgraph cluster_{grp.id} {{ label="g{grp.id} {grp.kind}";')
        lines += [f'    "{n.name}" [label="{n.name}\\n{n.op} {n.type}"];' for n in grp.nodes]
        lines.append("  }")
    for n in g.nodes:
        if id(n) not in grouped:
            lines.append(f'  "{n.name}" [label="{n.name}\\n{n.op} {n.type}", style=dashed];')
        for a in n.args:
            if a is not None:
                lines.append(f'  "{a.name}" -> "{n.name}";')
    lines.append("}")
    return "\n".join(lines) + "\n"


@register
@dataclass(frozen=True)
class FuseKernels:
    """Plans kernel groups: sets `g.plan` (a graph rewrite after it drops the plan again). `transposed`:
    a GEMM reads a transposed view of an input in place where its elements are at most this many bytes
    (`in_place_view`; 0: never)."""

    name: ClassVar[str] = "fuse"
    transposed: int = 0

    def run(self, g: Graph, trace: Trace) -> bool:
        g.plan = fuse(g, self.transposed)
        trace.record(Firing(self.name, "plan", g.outputs[0].name if g.outputs else g.name, f"{len(g.nodes)} values",
                            f"{len(g.plan.groups)} kernel groups"))
        return False  # the graph itself is unchanged
