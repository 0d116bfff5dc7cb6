"""SSA graph: single-output nodes in topological order, inputs, parameters and outputs."""

from __future__ import annotations

import heapq
import itertools
import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from .infer import infer_type
from .ops import normalize_attrs, opdef
from .types import TensorType


@dataclass(eq=False)
class Node:
    """One SSA value. Identity is the object; `name` is unique within its graph."""

    op: str
    args: tuple[Node | None, ...]
    attrs: dict[str, Any]
    type: TensorType
    name: str
    meta: dict[str, Any] = field(default_factory=dict)  # source line etc.; not printed

    @property
    def shape(self) -> tuple[int, ...]:
        return self.type.shape

    @property
    def dtype(self) -> str:
        return self.type.dtype

    def key(self) -> tuple:
        """Structural identity for CSE (operands by object identity)."""
        return (self.op, tuple(id(a) if a is not None else None for a in self.args),
                tuple(sorted(self.attrs.items())), self.type)

    def __repr__(self) -> str:
        return f"%{self.name}={self.op}:{self.type}"


class Graph:
    def __init__(self, name: str = "main") -> None:
        self.name = name
        self.nodes: list[Node] = []
        self.outputs: list[Node] = []
        self.weights: dict[str, torch.Tensor] = {}  # param key -> real value
        self.meta: dict[str, Any] = {}  # provenance (problem file, train mode, opaque ops)
        self.plan: Any = None  # the kernel groups plan passes made (ir.passes.fusion.FusionPlan)
        self._names: set[str] = set()
        self._counter = itertools.count()

    # --- construction
    def fresh_name(self, hint: str) -> str:
        base = "".join(c if c.isalnum() or c == "_" else "_" for c in hint) or "v"
        if base[0].isdigit():
            base = "v" + base
        name, i = base, 0
        while name in self._names:
            i += 1
            name = f"{base}_{i}"
        self._names.add(name)
        return name

    def add(self, op: str, args: Sequence[Node | None] = (), attrs: dict[str, Any] | None = None,
            type: TensorType | None = None, name: str | None = None) -> Node:
        attrs = normalize_attrs(op, attrs or {})
        if type is None:
            type = infer_type(op, [a.type if a is not None else None for a in args], attrs)
        node = Node(op, tuple(args), attrs, type, self.fresh_name(name or op))
        self.nodes.append(node)
        return node

    def input(self, name: str, type: TensorType) -> Node:
        return self.add("input", (), {}, type, name)

    def param(self, key: str, value: torch.Tensor, name: str | None = None) -> Node:
        self.weights[key] = value
        return self.add("param", (), {"key": key}, TensorType.of(value), name or key.replace(".", "_"))

    # --- queries
    @property
    def inputs(self) -> list[Node]:
        return [n for n in self.nodes if n.op == "input"]

    @property
    def params(self) -> list[Node]:
        return [n for n in self.nodes if n.op == "param"]

    def users(self) -> dict[Node, list[Node]]:
        u: dict[Node, list[Node]] = {n: [] for n in self.nodes}
        for n in self.nodes:
            for a in n.args:
                if a is not None:
                    u[a].append(n)
        return u

    def ops(self) -> list[str]:
        return [n.op for n in self.nodes]

    # --- mutation
    def replace_uses(self, old: Node, new: Node) -> None:
        self.plan = None  # a plan of the graph before this rewrite no longer describes it
        for n in self.nodes:
            if any(a is old for a in n.args):
                n.args = tuple(new if a is old else a for a in n.args)
        self.outputs = [new if o is old else o for o in self.outputs]

    def replace_all(self, mapping: dict[Node, Node]) -> None:
        """`replace_uses` for every pair of `mapping` in one pass over the graph (a chain a -> b -> c reads
        c): what a pass that replaces many nodes does, instead of one pass per node."""
        if not mapping:
            return
        self.plan = None
        for n in self.nodes:
            read_through(n, mapping)
        self.outputs = [_final(o, mapping) for o in self.outputs]

    def cleanup(self) -> int:
        """Drop nodes no output depends on (inputs stay: they are the signature) and restore a
        topological order after rewrites appended nodes, keeping the original order where it can.
        Returns how many nodes were dropped."""
        live: set[int] = set()
        stack = [o for o in self.outputs] + self.inputs
        while stack:
            n = stack.pop()
            if id(n) in live:
                continue
            live.add(id(n))
            stack.extend(a for a in n.args if a is not None)
        kept = [n for n in self.nodes if id(n) in live]
        pos = {id(n): i for i, n in enumerate(kept)}
        pending = {id(n): sum(1 for a in set(map(id, filter(None, n.args)))) for n in kept}
        consumers: dict[int, list[Node]] = {id(n): [] for n in kept}
        for n in kept:
            for aid in set(map(id, filter(None, n.args))):
                consumers[aid].append(n)
        ready = [(pos[id(n)], n) for n in kept if pending[id(n)] == 0]
        heapq.heapify(ready)
        order: list[Node] = []
        while ready:
            _, n = heapq.heappop(ready)
            order.append(n)
            for c in consumers[id(n)]:
                pending[id(c)] -= 1
                if pending[id(c)] == 0:
                    heapq.heappush(ready, (pos[id(c)], c))
        if len(order) != len(kept):
            raise ValueError("graph has a cycle")
        before = len(self.nodes)
        # inputs first, in signature order; then params; then the computation
        self.nodes = ([n for n in order if n.op == "input"] + [n for n in order if n.op == "param"]
                      + [n for n in order if n.op not in ("input", "param")])
        self._names = {n.name for n in self.nodes}
        live_keys = {p.attrs["key"] for p in self.params}
        self.weights = {k: v for k, v in self.weights.items() if k in live_keys}
        return before - len(self.nodes)

    def copy(self) -> Graph:
        g = Graph(self.name)
        m: dict[Node, Node] = {}
        for n in self.nodes:
            c = Node(n.op, tuple(m[a] if a is not None else None for a in n.args), dict(n.attrs),
                     n.type, n.name, dict(n.meta))
            m[n] = c
            g.nodes.append(c)
        g.outputs = [m[o] for o in self.outputs]
        g.weights = dict(self.weights)
        g.meta = dict(self.meta)
        g._names = set(self._names)
        return g

    def __iter__(self) -> Iterable[Node]:
        return iter(self.nodes)

    def __len__(self) -> int:
        return len(self.nodes)

    def __str__(self) -> str:
        return print_graph(self)


def _final(a: Node, mapping: dict[Node, Node]) -> Node:
    while a in mapping:
        a = mapping[a]
    return a


def read_through(n: Node, mapping: dict[Node, Node]) -> None:
    """`n` reads what `mapping` replaced its arguments by (through chains of replacements)."""
    if mapping and any(a in mapping for a in n.args if a is not None):
        n.args = tuple(_final(a, mapping) if a is not None else None for a in n.args)


# --- the text form's printer (the parser is in ir.text)
def format_value(v: Any) -> str:
    if v is None:
        return "none"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        r = repr(v)
        return r if any(c in r for c in ".e") else r + ".0"
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, tuple):
        return "[" + ", ".join(format_value(x) for x in v) + "]"
    raise TypeError(f"cannot print attribute value {v!r}")


def format_attrs(n: Node) -> str:
    defaults = opdef(n.op).defaults()
    # a default is left out only when it is the same value of the same type (1 is not 1.0)
    shown = [(k, v) for k, v in n.attrs.items()
             if k not in defaults or type(defaults[k]) is not type(v) or defaults[k] != v]
    if not shown:
        return ""
    return " {" + ", ".join(f"{k}={format_value(v)}" for k, v in shown) + "}"


def print_node(n: Node) -> str:
    args = ", ".join("none" if a is None else f"%{a.name}" for a in n.args)
    return f"%{n.name}: {n.type} = {n.op}({args}){format_attrs(n)}"


def print_graph(g: Graph) -> str:
    lines = [f"graph {g.name} {{"]
    lines += ["  " + print_node(n) for n in g.nodes]
    state = g.meta.get("mutations", [])
    user = g.outputs[:len(g.outputs) - len(state)]
    updates = "".join(f' update "{k}" = %{o.name}' for k, o in zip(state, g.outputs[len(user):]))
    lines.append("  return " + ", ".join(f"%{o.name}" for o in user) + updates)
    lines.append("}")
    return "\n".join(lines) + "\n"
