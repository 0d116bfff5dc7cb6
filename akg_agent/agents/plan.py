"""The designer's plan: per fusion group a strategy, a DSL and schedule hints, and a performance target
from the cost model. The same JSON schema is what a model must answer with (prompts/designer.j2)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from .parse import ReplyError

STRATEGIES = ("generated", "library", "model")  # rules-engine kernel, torch library call, model-written


@dataclass
class GroupPlan:
    group: int
    kind: str  # pointwise, reduce, contraction, window, scan
    ops: list[str]
    strategy: str
    schedule: dict[str, Any] = field(default_factory=dict)
    est_ms: float | None = None  # the cost model's estimate for this group
    why: str = ""


@dataclass
class Plan:
    problem: str
    dsl: str
    target: str
    groups: list[GroupPlan]
    sol_ms: float | None  # whole-program speed-of-light (cost model)
    goal_ms: float | None  # the performance target: stop once a verified module is this fast
    by: str = "rules"  # rules | model | human
    notes: str = ""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def summary(self) -> str:
        sol = f"{self.sol_ms:.4g} ms" if self.sol_ms is not None else "unknown"
        goal = f"{self.goal_ms:.4g} ms" if self.goal_ms is not None else "none (not measurable here)"
        lines = [f"plan by {self.by}: {self.dsl} on {self.target}; speed-of-light {sol}; goal {goal}"]
        for g in self.groups:
            sched = ", ".join(f"{k}={v}" for k, v in g.schedule.items()) or "default"
            est = f" est {g.est_ms:.3g} ms" if g.est_ms is not None else ""
            lines.append(f"  group {g.group} [{g.kind}] {g.strategy}: {' '.join(g.ops)} [{sched}]{est}"
                         + (f" ({g.why})" if g.why else ""))
        if self.notes:
            lines.append(f"  notes: {self.notes}")
        return "\n".join(lines)


def plan_from_json(doc: dict[str, Any], base: Plan) -> Plan:
    """Validate a plan a model or a person wrote against the rules plan it edits: the same groups, known
    strategies, schedule hints as flat str -> scalar maps. Any problem is a ReplyError naming the field."""
    groups = doc.get("groups")
    if not isinstance(groups, list):
        raise ReplyError('the plan needs "groups": a list with one entry per fusion group')
    known = {g.group: g for g in base.groups}
    seen: dict[int, GroupPlan] = {}
    for i, g in enumerate(groups):
        if not isinstance(g, dict) or not isinstance(g.get("group"), int):
            raise ReplyError(f'groups[{i}] needs an integer "group" id (one of {sorted(known)})')
        gid = g["group"]
        if gid not in known:
            raise ReplyError(f"groups[{i}]: there is no fusion group {gid}; the groups are {sorted(known)}")
        strat = g.get("strategy", known[gid].strategy)
        if strat not in STRATEGIES:
            raise ReplyError(f'groups[{i}].strategy {strat!r}: choose one of {", ".join(STRATEGIES)}')
        sched = g.get("schedule", {})
        if not isinstance(sched, dict) or not all(isinstance(v, int | float | str | bool) for v in sched.values()):
            raise ReplyError(f"groups[{i}].schedule must map names to numbers or strings")
        seen[gid] = GroupPlan(gid, known[gid].kind, known[gid].ops, strat, dict(sched), known[gid].est_ms,
                              str(g.get("why", "")))
    missing = sorted(set(known) - set(seen))
    if missing:
        raise ReplyError(f"the plan leaves out fusion groups {missing}; give every group an entry")
    goal = doc.get("goal_ms", base.goal_ms)
    if goal is not None and not isinstance(goal, int | float):
        raise ReplyError('"goal_ms" must be a number of milliseconds or null')
    return Plan(base.problem, base.dsl, base.target, [seen[g.group] for g in base.groups], base.sol_ms,
                None if goal is None else float(goal), by=str(doc.get("by", "model")), notes=str(doc.get("notes", "")))
