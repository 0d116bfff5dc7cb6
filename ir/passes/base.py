"""Pass framework: passes are small named dataclasses; rewrites are (pattern, rewrite) rules.

Every rule firing is recorded in a `Trace`, so `akg ir --trace` shows which rule changed what.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, TypeVar

from ..graph import Graph, Node


@dataclass(frozen=True)
class Firing:
    pass_name: str
    rule: str
    node: str  # the value that was replaced
    before: str
    after: str

    def __str__(self) -> str:
        return f"[{self.pass_name}] {self.rule}: %{self.node} {self.before} -> {self.after}"


@dataclass
class Trace:
    firings: list[Firing] = field(default_factory=list)

    def record(self, f: Firing) -> None:
        self.firings.append(f)

    def rules(self) -> list[str]:
        return [f.rule for f in self.firings]

    def __str__(self) -> str:
        return "\n".join(map(str, self.firings))


class Pass(Protocol):
    """A pass (xDSL's ModulePass is the model): a frozen dataclass whose class-level `name` is how a
    pipeline string names it and whose fields are its options."""

    name: ClassVar[str]

    def run(self, g: Graph, trace: Trace) -> bool:
        """Transform `g` in place (plan passes set `g.plan`); return whether anything changed."""
        ...


REGISTRY: dict[str, type[Pass]] = {}
PassT = TypeVar("PassT", bound=type)


def register(cls: PassT) -> PassT:
    """Makes a pass class available to pipeline strings under its `name`."""
    REGISTRY[cls.name] = cls  # type: ignore[attr-defined]
    return cls


# --- patterns
@dataclass(frozen=True)
class Pat:
    """Matches a node: `op` (a name, a tuple of names, or None for any), operand sub-patterns
    (None: any operands), a predicate, and a name to bind the node to."""

    op: str | tuple[str, ...] | None = None
    args: tuple[Pat, ...] | None = None
    bind: str | None = None
    where: Callable[[Node], bool] | None = None

    def ops(self) -> tuple[str, ...] | None:
        return (self.op,) if isinstance(self.op, str) else self.op

    def match(self, n: Node | None, binds: dict[str, Node]) -> bool:
        if n is None:
            return False
        ops = self.ops()
        if ops is not None and n.op not in ops:
            return False
        if self.args is not None:
            if len(self.args) != len(n.args):
                return False
            if not all(p.match(a, binds) for p, a in zip(self.args, n.args)):
                return False
        if self.where is not None and not self.where(n):
            return False
        if self.bind is not None:
            if self.bind in binds and binds[self.bind] is not n:
                return False
            binds[self.bind] = n
        return True


def P(op: str | tuple[str, ...] | None = None, *args: Pat, bind: str | None = None,
      where: Callable[[Node], bool] | None = None) -> Pat:
    return Pat(op, tuple(args) if args else None, bind, where)


def X(bind: str, where: Callable[[Node], bool] | None = None) -> Pat:
    """Any node, bound to `bind`."""
    return Pat(None, None, bind, where)


class Rewriter:
    """What a rewrite may do: add nodes to the graph (named after the node being replaced)."""

    def __init__(self, g: Graph, root: Node, live: _Live | None = None) -> None:
        self.g, self.root, self.live = g, root, live

    def uses(self, x: Node) -> int:
        """How many times live nodes read `x` (outputs aside)."""
        if self.live is not None:
            return len(self.live.users.get(id(x), ()))
        return sum(a is x for u in self.g.nodes for a in u.args)

    def op(self, name: str, args: Sequence[Node | None], **attrs: Any) -> Node:
        n = self.g.add(name, list(args), attrs, name=f"{self.root.name}_{name}")
        n.meta.update({k: v for k, v in self.root.meta.items() if k == "source"})
        return n

    def scalar(self, value: Any, dtype: str) -> Node:
        return self.op("scalar", [], value=value, dtype=dtype)


Rewrite = Callable[[Rewriter, dict[str, Node]], Node | None]


@dataclass(frozen=True)
class Rule:
    name: str
    pattern: Pat
    rewrite: Rewrite


@dataclass(frozen=True)
class RewritePass:
    """Applies its rules (a class-level table) to every node until none fires (bounded)."""

    name: ClassVar[str] = "rewrite"
    rules: ClassVar[tuple[Rule, ...]] = ()
    max_sweeps: int = 20

    def run(self, g: Graph, trace: Trace) -> bool:
        return self.apply(self.rules, g, trace)

    def apply(self, rules: tuple[Rule, ...], g: Graph, trace: Trace) -> bool:
        """`rules` to a fixed point (a pass whose rules take its options builds them in `run`)."""
        by_op: dict[str | None, list[Rule]] = {}
        for r in rules:
            for op in r.pattern.ops() or (None,):
                by_op.setdefault(op, []).append(r)
        changed_any = False
        for _ in range(self.max_sweeps):
            changed = False
            live = _Live(g)
            for n in list(g.nodes):
                if not live.has(n):  # replaced earlier in this sweep
                    continue
                for rule in by_op.get(n.op, []) + by_op.get(None, []):
                    binds: dict[str, Node] = {}
                    if not rule.pattern.match(n, binds):
                        continue
                    new = rule.rewrite(Rewriter(g, n, live), binds)
                    if new is None or new is n:
                        continue
                    if new.type.shape != n.type.shape or new.type.dtype != n.type.dtype:
                        raise AssertionError(f"rule {rule.name} changed the type of %{n.name}: "
                                             f"{n.type} -> {new.type}")
                    live.replace(n, new)
                    trace.record(Firing(self.name, rule.name, n.name, _summary(n), _summary(new)))
                    changed = True
                    break
            if not changed:
                break
            g.cleanup()
            changed_any = True
        return changed_any


class _Live:
    """The nodes the outputs depend on, kept as rewrites replace nodes: each live node's users (an output
    counts as one), so a replacement touches the replaced node's users and the nodes that die with it, not
    the whole graph (an unrolled recurrence's graph has tens of thousands of nodes: walking it after every
    firing was quadratic). A DAG: a node is live while it has a user."""

    def __init__(self, g: Graph) -> None:
        self.g = g
        self.users: dict[int, list[Node]] = {}  # id -> live users (with repeats: one per use)
        self.outs: dict[int, int] = {}  # id -> how many outputs it is
        for o in g.outputs:
            self.outs[id(o)] = self.outs.get(id(o), 0) + 1
            self._revive(o)

    def has(self, n: Node) -> bool:
        return id(n) in self.users

    def _revive(self, n: Node) -> None:
        """`n` live, with what it reads that was not: each newly live node a user of each of its arguments."""
        fresh, stack = [], [n]
        while stack:
            x = stack.pop()
            if id(x) in self.users:
                continue
            self.users[id(x)] = []
            fresh.append(x)
            stack.extend(a for a in x.args if a is not None)
        for x in fresh:
            for a in x.args:
                if a is not None:
                    self.users[id(a)].append(x)

    def replace(self, old: Node, new: Node) -> None:
        """`g.replace_uses(old, new)`, liveness kept: `new` live, `old` (no use left) and what only it read
        dead."""
        g = self.g
        g.plan = None  # a plan of the graph before this rewrite no longer describes it
        self._revive(new)
        users = self.users.pop(id(old), [])
        for u in dict.fromkeys(users):  # each user once: its every use of old at a time
            u.args = tuple(new if a is old else a for a in u.args)
        self.users[id(new)].extend(users)
        k = self.outs.pop(id(old), 0)
        if k:
            g.outputs = [new if o is old else o for o in g.outputs]
            self.outs[id(new)] = self.outs.get(id(new), 0) + k
        stack = [old]
        while stack:  # the dead node's arguments lose a user; one left with none dies too
            x = stack.pop()
            for a in x.args:
                if a is None or id(a) not in self.users:
                    continue
                us = self.users[id(a)]
                us.remove(x)
                if not us and id(a) not in self.outs:
                    del self.users[id(a)]
                    stack.append(a)


def _summary(n: Node) -> str:
    args = ", ".join("none" if a is None else f"%{a.name}" for a in n.args)
    return f"{n.op}({args})"


@dataclass(frozen=True)
class Pipeline:
    """Runs its stages (a class-level tuple of pass classes) in order, repeating the whole list until
    a fixed point (bounded)."""

    name: ClassVar[str] = "pipeline"
    stages: ClassVar[tuple[type[Pass], ...]] = ()
    repeat: int = 4

    def run(self, g: Graph, trace: Trace) -> bool:
        changed_any = False
        passes = [stage() for stage in self.stages]
        for _ in range(self.repeat):
            changed = False
            for p in passes:
                changed |= p.run(g, trace)
            changed_any |= changed
            if not changed:
                break
        return changed_any
