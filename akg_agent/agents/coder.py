"""The coder: with the rules engine, kernel IR through a renderer; with a model, a whole ModelNew module
written from the plan, the rules engine's module as a starting point, the verifier's feedback, the DSL
guide sections and past verified modules that BM25 picks for this prompt."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import prompts
from dsl_backends import get_backend
from ir.errors import AkgError

from ..ranking import ranked_space
from ..translate import Translation, render
from ..tuning_db import TuningDB
from .ask import ask
from .designer import hardware_notes
from .llm import Model
from .parse import extract_module
from .plan import Plan
from .trace import RunState

SANDBOX_PATH = re.compile(r"/[^\s'\"]*akg-verify-[^/\s'\"]+/")


def clean(text: str) -> str:
    """Feedback without the sandbox's temporary paths: prompts stay the same from run to run (replay)."""
    return SANDBOX_PATH.sub("", text)


@dataclass
class CoderTask:
    action: str  # write | fix | optimise | strategy
    feedback: str = ""
    start_source: str = ""
    start_label: str = ""



class NoVariantLeft(AkgError):
    """The rules engine has tried every schedule combination the cost model ranks."""


@dataclass
class Coder:
    model: Model | None
    t: Translation
    db: TuningDB | None = None
    use_ncu: bool = True  # profile feedback from Nsight Compute where it can run
    variant: int = 0  # the rules engine's schedule variant (0: the plan's schedule)
    notes: list[str] = field(default_factory=list)

    # --- rules engine
    def apply_plan(self, plan: Plan) -> None:
        """Schedule hints from the plan, where the backend knows the names."""
        backend = get_backend(self.t.dsl)
        hints = {g.group: g.schedule for g in plan.groups}
        for k in self.t.program.kernels():
            space = backend.tuning_space(k, self.t.target)
            known = set(self.t.schedules[k.name]) | (set(space[0]) if space else set())
            for name, value in hints.get(k.group, {}).items():
                if name in known:
                    self.t.schedules[k.name] = self.t.schedules[k.name].replace(**{name: value})
                else:
                    self.notes.append(f"{k.name}: schedule hint {name}={value} unknown to {self.t.dsl}; ignored")

    def rules_source(self) -> str:
        return render(self.t)

    def next_variant(self) -> bool:
        """The next schedule combination by the cost model's ranking; False when none is left."""
        backend = get_backend(self.t.dsl)
        groups = {g.id: g for g in self.t.plan.groups}
        self.variant += 1
        changed = False
        for k in self.t.program.kernels():
            ranked = ranked_space(backend, k, groups.get(k.group), self.t.target)
            if self.variant - 1 < len(ranked):
                self.t.schedules[k.name] = ranked[self.variant - 1]
                changed = True
        return changed

    # --- model
    def prompt(self, task: CoderTask, plan: Plan, guidance: list[str]) -> tuple[str, str]:
        query = " ".join([task.action, task.feedback] + [f"{g.kind} {' '.join(g.ops)}" for g in plan.groups])
        sections = prompts.bm25(query, prompts.guide_sections(self.t.dsl), k=3)
        past: list[prompts.Section] = []
        if self.db is not None:
            rows = self.db.verified_modules(self.t.target.name, self.t.dsl)
            docs = [prompts.Section(f"kernel:{p}", p, src) for p, ops, src in rows if p != self.t.problem.name]
            past = prompts.bm25(" ".join(g.ops[0] for g in plan.groups if g.ops), docs, k=1)
        user = prompts.render("coder.j2", mode=task.action, dsl=self.t.dsl, target=self.t.target.name,
                              feedback=clean(task.feedback), problem_source=self.t.problem.read_text(),
                              plan_summary=plan.summary(), guidance="\n".join(guidance),
                              start_source=task.start_source, start_label=task.start_label,
                              guide_intro=prompts.guide_intro(self.t.dsl), sections=sections, past_kernels=past,
                              tolerance="1e-4 for fp32 outputs, 1e-2 for fp16/bf16")
        system = prompts.render("system.j2", role="coder", dsl=self.t.dsl, hardware=hardware_notes(self.t))
        return system, user

    def write(self, task: CoderTask, plan: Plan, state: RunState) -> tuple[str, str, list[str]]:
        """(source, author, notes) for one attempt."""
        wants_model = self.model is not None and any(g.strategy == "model" for g in plan.groups) or (
            self.model is not None and task.action != "write")
        if not wants_model:
            if task.action == "optimise" or task.action == "strategy":
                if not self.next_variant():
                    raise NoVariantLeft("the rules engine has no schedule variant left")
            return self.rules_source(), "rules", list(self.notes)
        assert self.model is not None
        system, user = self.prompt(task, plan, state.guidance)
        src = ask(self.model, system, user, "module", state, "coder", extract_module)
        if src is None:
            state.event("coder", "fallback", by="rules", why="the model's reply broke the contract twice: "
                        "the rules engine wrote this step")
            return self.rules_source(), "rules", ["model reply malformed twice: the rules engine wrote this step"]
        return src, self.model.name, []
