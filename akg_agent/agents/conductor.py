"""The conductor: after each verification, fix (the error goes back to the coder), optimise (with
profile feedback), try another strategy, or stop at the goal or the budget."""

from __future__ import annotations

from dataclasses import dataclass

from .trace import RunState


@dataclass(frozen=True)
class Decision:
    action: str  # write | fix | optimise | strategy | stop
    why: str


@dataclass
class Conductor:
    budget: int  # attempts in all (a resumed run counts the earlier ones)
    strategy_after: int = 3  # rejections in a row before the coder is told to drop its approach

    def decide(self, st: RunState, has_model: bool) -> Decision:
        if not st.attempts:
            return Decision("write", "no attempt yet")
        if len(st.attempts) >= self.budget:
            return Decision("stop", f"budget of {self.budget} attempts used")
        last, best = st.attempts[-1], st.best()
        if last.code in ("compiled_not_run", "not_run"):
            return Decision("stop", "no device here to verify or time on: " + last.reason)
        if not last.accepted:
            if has_model:
                streak = 0
                for a in reversed(st.attempts):
                    if a.accepted:
                        break
                    streak += 1
                if streak % self.strategy_after == 0:
                    return Decision("strategy", f"{streak} rejections in a row: drop this approach")
                return Decision("fix", f"rejected ({last.code}): the verdict goes back to the coder")
            if best is not None and best.time_ms is not None:
                return Decision("optimise", "that schedule was rejected: the next one by the cost model")
            return Decision("stop", "the rules engine's module was rejected and no model can fix it (try --llm)")
        assert best is not None
        if best.time_ms is None:
            return Decision("stop", "verified; no target device here to time it, so nothing to optimise against")
        goal = st.plan.goal_ms if st.plan else None
        if goal is not None and best.time_ms <= goal:
            return Decision("stop", f"goal reached: {best.time_ms:.4g} ms <= {goal:.4g} ms")
        return Decision("optimise", f"best {best.time_ms:.4g} ms" + (f", goal {goal:.4g} ms" if goal else ""))
