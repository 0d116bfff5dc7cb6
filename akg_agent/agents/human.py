"""Human in the loop (`akg translate --interactive`): approve or edit the plan before any code is written,
then after each verification stop, continue or redirect (guidance that goes into the next prompt)."""

from __future__ import annotations

import os
import shlex
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from .designer import edit_plan
from .parse import ReplyError
from .plan import Plan
from .trace import Attempt


class Human(Protocol):
    def review_plan(self, plan: Plan, run_dir: Path) -> Plan | None: ...  # None: quit

    def after_attempt(self, att: Attempt, next_action: str) -> tuple[str, str]: ...  # (continue|stop|redirect, text)


@dataclass
class ConsoleHuman:
    ask: Callable[[str], str] = input
    say: Callable[[str], None] = print

    def review_plan(self, plan: Plan, run_dir: Path) -> Plan | None:
        while True:
            self.say(plan.summary())
            ans = self.ask("plan: [a]pprove, [e]dit, [q]uit? ").strip().lower()[:1]
            if ans in ("", "a"):
                return plan
            if ans == "q":
                return None
            if ans == "e":
                path = run_dir / "plan.json"
                import json

                path.write_text(json.dumps(plan.to_json(), indent=1))
                editor = os.environ.get("VISUAL") or os.environ.get("EDITOR")
                if editor:
                    subprocess.run([*shlex.split(editor), str(path)], check=False)
                else:
                    self.ask(f"edit {path}, then press Enter ")
                try:
                    plan = edit_plan(plan, path.read_text())
                except ReplyError as e:
                    self.say(f"that plan is not valid: {e}; the previous plan stands")

    def after_attempt(self, att: Attempt, next_action: str) -> tuple[str, str]:
        self.say(att.line())
        ans = self.ask(f"next: {next_action}. [c]ontinue, [s]top, [r]edirect? ").strip().lower()[:1]
        if ans == "s":
            return "stop", ""
        if ans == "r":
            return "redirect", self.ask("guidance for the coder: ").strip()
        return "continue", ""


@dataclass
class ScriptedHuman:
    """For tests: answers in order (plan edits as JSON text)."""

    plan_edit: str | None = None
    answers: list[tuple[str, str]] = field(default_factory=list)
    seen: list[str] = field(default_factory=list)

    def review_plan(self, plan: Plan, run_dir: Path) -> Plan | None:
        self.seen.append(plan.summary())
        return edit_plan(plan, self.plan_edit) if self.plan_edit else plan

    def after_attempt(self, att: Attempt, next_action: str) -> tuple[str, str]:
        self.seen.append(att.line())
        return self.answers.pop(0) if self.answers else ("continue", "")
