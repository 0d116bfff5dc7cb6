"""A translation: the problem's graph, plan, kernel program and schedules for one DSL and target, and what
was done with it (source, verdict, notes); `translate.build` makes one, `translate.render` writes it."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dsl_backends.module import Bucket
from hardware_models.spec import HardwareModel
from ir.graph import Graph
from ir.kernel.ir import KernelProgram
from ir.kernel.schedule import Schedule
from ir.passes.fusion import FusionPlan

from .strategy import Strategy


@dataclass
class Translation:
    problem: Path
    dsl: str
    target: HardwareModel
    executor: str
    graph: Graph
    plan: FusionPlan
    program: KernelProgram
    schedules: dict[str, Schedule]  # kernel name -> its schedule (values: a variant replaces an entry)
    source: str = ""
    verdict: Any = None
    notes: list[str] = field(default_factory=list)
    compiled: str = ""  # a compile-only executor's report: compiled for the target, not run, not verified
    tuned: dict[str, float] = field(default_factory=dict)  # kernel -> its module time in the tuning database
    strategy: Strategy = field(default_factory=lambda: Strategy())
    strategy_s: float | None = None  # the strategy's measured module time, where the tuning database chose it
    strategy_why: str = ""  # where the cost model chose the strategy instead: its estimates
    # the module body rendered for one set of schedules (the header, which carries the verdict, is prepended)
    buckets: list[Bucket] = field(default_factory=list)  # --dynamic: programs for smaller sizes (module.Bucket)
    _body: tuple[frozenset[tuple[str, Schedule]], str] | None = None

    def summary(self) -> dict[str, Any]:
        ks = self.program.kernels()
        return {"problem": str(self.problem), "dsl": self.dsl, "target": self.target.name, "executor": self.executor,
                "kernels": [{"name": k.name, "kind": k.kind, "schedule": dict(self.schedules[k.name])} for k in ks],
                "library_calls": [s.op for s in self.program.library_calls()],
                "verified": bool(self.verdict and self.verdict.accepted),
                "verdict": self.verdict.line() if self.verdict else "not verified"}
