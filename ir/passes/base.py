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

    def __init__(self, g: Graph, root: Node) -> None:
        self.g, self.root = g, root

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
            live = _live(g)
            for n in list(g.nodes):
                if id(n) not in live:  # replaced earlier in this sweep
                    continue
                for rule in by_op.get(n.op, []) + by_op.get(None, []):
                    binds: dict[str, Node] = {}
                    if not rule.pattern.match(n, binds):
                        continue
                    new = rule.rewrite(Rewriter(g, n), binds)
                    if new is None or new is n:
                        continue
                    if new.type.shape != n.type.shape or new.type.dtype != n.type.dtype:
                        raise AssertionError(f"rule {rule.name} changed the type of %{n.name}: "
                                             f"{n.type} -> {new.type}")
                    g.replace_uses(n, new)
                    trace.record(Firing(self.name, rule.name, n.name, _summary(n), _summary(new)))
                    changed = True
                    live = _live(g)
                    break
            if not changed:
                break
            g.cleanup()
            changed_any = True
        return changed_any


def _live(g: Graph) -> set[int]:
    live: set[int] = set()
    stack = list(g.outputs)
    while stack:
        n = stack.pop()
        if id(n) not in live:
            live.add(id(n))
            stack.extend(a for a in n.args if a is not None)
    return live


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
