"""The designer: a plan per fusion group (strategy, DSL, schedule hints) and a performance target from
the cost model. The rules engine's plan always comes first; a model may edit it (its reply must hold a
fenced json plan in the schema of prompts/designer.j2), and a person may edit it after that."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

import prompts
from dsl_backends import dsls_for, get_backend
from hardware_models.cost import estimate_group, speed_of_light
from ir.graph import print_graph
from ir.passes.library import LIBRARY_FAMILIES, VIEW_OPS

from ..strategy import recurrence_bound
from ..translate import Translation
from .ask import ask
from .llm import Model
from .parse import ReplyError, extract_json
from .plan import GroupPlan, Plan, plan_from_json
from .trace import RunState

CHECKED_BY = {"interpreter": "verified through its interpreter", "emulator": "verified through the emulator",
              "compile-only": "compiled for it, not run", "none": "written, not run"}


def hardware_notes(t: Translation) -> str:
    return prompts.render("hardware.j2", hw=t.target, dsls=dsls_for(t.target)).strip()


def rules_plan(t: Translation, goal_frac: float, model: bool = False) -> Plan:
    """`model`: a model is at hand, and writes the groups the rules engine cannot lower (ops left
    opaque); without one they stay torch calls (`--allow-opaque`)."""
    sol_ms = speed_of_light(t.graph, t.target).sol_s * 1e3
    libs = {s.group: s.op for s in t.program.library_calls()}
    last = {s.group for s in t.program.library_calls() if s.attrs.get("channels_last")}
    kinds = get_backend(t.dsl).manifest.kinds
    lib = "cuDNN" if t.target.kind == "gpu" else "oneDNN"  # what torch's convolution calls there
    chosen = {op: f for f in t.strategy.library for op in LIBRARY_FAMILIES[f]}  # op -> its family
    how = ("the tuning database measured it faster" if t.strategy_s is not None else
           "the cost model estimates it faster; akg tune measures both" if t.strategy_why else "--library")
    kernels: dict[int, dict[str, Any]] = {}
    for k in t.program.kernels():
        kernels.setdefault(k.group, {}).update(t.schedules[k.name])
    groups = []
    for grp in t.plan.groups:
        est = estimate_group(grp, t.target).time_s * 1e3
        opaque = [str(n.attrs["target"]) for n in grp.nodes if n.op == "opaque"]
        strat = "model" if opaque and model else "library" if grp.id in libs else "generated"
        why = (f"the rules engine cannot lower {', '.join(opaque)}: the model writes it" if strat == "model" else
               f"the rules engine cannot lower {', '.join(opaque)}: left a torch call (--allow-opaque)" if opaque else
               "" if strat == "generated" else (
            f"torch library call ({lib}) over channels-last operands (--conv channels-last), the transpositions "
            "and epilogue in generated kernels" if grp.id in last else
            f"torch library call ({lib}) + fused epilogue; --conv "
            "generated asks for the generated convolution" if libs[grp.id] == "conv" and "conv" in kinds else
            "torch library call + fused epilogue; --conv generated or --pure generates it (one implicit GEMM "
            "per output phase)" if libs[grp.id] == "conv_transpose" and "conv" in kinds else
            f"torch's recurrent layer (cuDNN on NVIDIA GPUs: one persistent kernel a layer): generated, it would "
            f"launch kernels for each of more than {recurrence_bound(t.target)} steps; --pure generates them"
            if libs[grp.id] == "recurrence" else
            f"the {chosen[libs[grp.id]]} family left to torch ({how}), prologue and epilogue generated"
            if libs[grp.id] in chosen else "a view: torch returns it without computing (of an output, or passed to "
            "the library call that reads it)" if libs[grp.id] in VIEW_OPS else
            "no generated kernel for this op yet: torch library call + fused epilogue"))
        groups.append(GroupPlan(grp.id, grp.kind, [n.op for n in grp.nodes], strat, kernels.get(grp.id, {}),
                                round(est, 6) if math.isfinite(est) else None, why))
    measurable = t.executor == "native"
    manifest = get_backend(t.dsl).manifest
    how = (manifest.checked_on.get(t.target.kind, manifest.checked_by) if t.executor == manifest.fallback else "") or \
        CHECKED_BY.get(t.executor, t.executor)
    return Plan(t.problem.name, t.dsl, t.target.name, groups, round(sol_ms, 6),
                round(sol_ms / goal_frac, 6) if measurable else None, by="rules",
                notes="" if measurable else f"no {t.target.name} here: {how}, not timed")


@dataclass
class Designer:
    model: Model | None
    goal_frac: float = 0.5  # the goal: this fraction of speed-of-light

    def plan(self, t: Translation, state: RunState) -> Plan:
        base = rules_plan(t, self.goal_frac, model=self.model is not None)
        state.event("designer", "plan", by="rules", why="the rules engine's plan from the cost model")
        if self.model is None:
            return base

        space = {}
        backend = get_backend(t.dsl)
        for k in t.program.kernels():
            cands = backend.tuning_space(k, t.target)
            if cands:
                space.setdefault(k.kind, sorted(cands[0]))
        user = prompts.render("designer.j2", plan=base, problem_source=t.problem.read_text(),
                              graph_ir=print_graph(t.graph), rules_plan=json.dumps(base.to_json(), indent=1),
                              schedule_names=space)
        system = prompts.render("system.j2", role="designer", dsl=t.dsl, hardware=hardware_notes(t))
        doc = ask(self.model, system, user, "plan", state, "designer",
                  lambda text: plan_from_json(extract_json(text), base))
        if doc is None:
            state.event("designer", "fallback", by="rules", why="the model's plan broke the contract twice: "
                        "the rules engine's plan stands")
            return base
        doc.by = "model"
        state.event("designer", "plan", by="model", why=doc.notes[:200])
        return doc


def edit_plan(base: Plan, text: str) -> Plan:
    """A person's edit (JSON in the same schema); errors come back as ReplyError with the field named."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise ReplyError(f"not valid JSON: line {e.lineno}: {e.msg}") from None
    if not isinstance(doc, dict):
        raise ReplyError("the plan must be a JSON object")
    p = plan_from_json(doc, base)
    p.by = "human"
    return p
