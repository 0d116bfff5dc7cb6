"""Human in the loop (`akg translate --interactive`): approve or edit the plan before any code is written,
then after each verification stop, continue or redirect (guidance that goes into the next prompt)."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import time
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


@dataclass
class FileHuman:
    """The person answers through files in the run directory (what `akg ui` writes): the plan waits in
    `pending_plan.json` for `plan_decision.json` ({"action": "approve" | "edit" | "reject", "plan": ...}),
    an attempt in `pending_step.json` for `step_decision.json` ({"action": "continue" | "stop" |
    "redirect", "text": ...}). A stop the conductor would make anyway is not asked about."""

    poll_s: float = 0.2
    timeout_s: float = 24 * 3600.0
    run_dir: Path = Path(".")

    def _wait(self, run_dir: Path, pending: str, decision: str, doc: dict) -> dict:
        (run_dir / decision).unlink(missing_ok=True)
        (run_dir / pending).write_text(json.dumps(doc, indent=1, default=str))
        end = time.monotonic() + self.timeout_s
        try:
            while time.monotonic() < end:
                path = run_dir / decision
                if path.is_file():
                    try:
                        ans = json.loads(path.read_text())
                    except json.JSONDecodeError:  # written while read: the next poll sees it whole
                        time.sleep(self.poll_s)
                        continue
                    path.unlink(missing_ok=True)
                    return ans if isinstance(ans, dict) else {}
                time.sleep(self.poll_s)
            return {"action": "reject" if pending == "pending_plan.json" else "stop", "why": "no answer in time"}
        finally:
            (run_dir / pending).unlink(missing_ok=True)

    def review_plan(self, plan: Plan, run_dir: Path) -> Plan | None:
        self.run_dir = run_dir
        while True:
            ans = self._wait(run_dir, "pending_plan.json", "plan_decision.json",
                             {"plan": plan.to_json(), "summary": plan.summary()})
            action = ans.get("action")
            if action == "approve":
                return plan
            if action == "reject":
                return None
            if action == "edit":
                text = ans.get("plan")
                try:
                    plan = edit_plan(plan, text if isinstance(text, str) else json.dumps(text))
                except ReplyError as e:
                    (run_dir / "plan_error.txt").write_text(f"that plan is not valid: {e}; the previous plan stands")

    def after_attempt(self, att: Attempt, next_action: str) -> tuple[str, str]:
        if next_action == "stop":
            return "continue", ""
        ans = self._wait(self.run_dir, "pending_step.json", "step_decision.json",
                         {"attempt": att.n, "line": att.line(), "next": next_action})
        action = ans.get("action")
        if action in ("stop", "redirect"):
            return action, str(ans.get("text", ""))
        return "continue", ""
