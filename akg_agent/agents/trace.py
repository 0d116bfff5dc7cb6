"""The run directory: every attempt's source and verdict, the plan, the agents' events and the model
usage, saved after each step to run.json so that a killed run resumes (`--resume DIR`) with nothing lost.
Paths inside it are chosen by akg alone, never by a model's text."""

from __future__ import annotations

import hashlib
import json
import re
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ir.errors import AkgError

from .llm import Usage
from .plan import GroupPlan, Plan

VERSION = 1


@dataclass
class Attempt:
    n: int
    action: str  # write | fix | optimise | strategy
    by: str  # rules | the model's name
    source_file: str  # relative to the run directory
    accepted: bool
    code: str  # the verifier's code (ok, wrong_values, syntax, ...)
    reason: str
    time_ms: float | None = None
    baselines_ms: dict[str, float] = field(default_factory=dict)
    sol_frac: float | None = None  # speed-of-light / measured time
    notes: list[str] = field(default_factory=list)

    def speedups(self) -> dict[str, float]:
        if not self.time_ms:
            return {}
        return {k: v / self.time_ms for k, v in self.baselines_ms.items() if v}

    def line(self) -> str:
        head = f"attempt {self.n} ({self.action} by {self.by}): " + ("accepted" if self.accepted else "rejected")
        if self.code == "compiled_not_run":
            return f"attempt {self.n} ({self.action} by {self.by}): NOT verified: {self.reason}"
        if not self.accepted:
            return f"{head}: {self.reason}"
        if self.time_ms is None:
            return f"{head} (not timed here)"
        sp = ", ".join(f"{v:.3g}x vs {k}" for k, v in self.speedups().items())
        sol = f", {self.sol_frac:.0%} of speed-of-light" if self.sol_frac else ""
        return f"{head}: {self.time_ms:.4g} ms" + (f" ({sp})" if sp else "") + sol


def file_sha(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]


@dataclass
class RunState:
    run_dir: Path
    config: dict[str, Any]
    plan: Plan | None = None
    attempts: list[Attempt] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    guidance: list[str] = field(default_factory=list)
    result: dict[str, Any] = field(default_factory=dict)

    @property
    def path(self) -> Path:
        return self.run_dir / "run.json"

    def event(self, agent: str, what: str, **detail: Any) -> None:
        self.events.append({"agent": agent, "event": what, **detail, "at": round(time.time(), 3)})
        self.save()

    def best(self) -> Attempt | None:
        ok = [a for a in self.attempts if a.accepted]
        timed = [a for a in ok if a.time_ms is not None]
        # each attempt against eager in its own run where all have it: a shared host drifts between runs by
        # more than the modules differ
        if timed and all(a.baselines_ms.get("eager") for a in timed):
            return min(timed, key=lambda a: a.time_ms / a.baselines_ms["eager"])  # type: ignore[operator]
        if timed:
            return min(timed, key=lambda a: a.time_ms)  # type: ignore[arg-type, return-value]
        return ok[0] if ok else None

    def add_attempt(self, action: str, by: str, source: str, verdict: Any, notes: list[str]) -> Attempt:
        n = len(self.attempts) + 1
        rel = f"attempt_{n}.py"
        (self.run_dir / rel).write_text(source)
        t = verdict.details.get("timing") or {}
        cand = (t.get("candidate") or {}).get("median_s")
        base = {k: v["median_s"] * 1e3 for k, v in t.items() if k != "candidate" and v.get("median_s")}
        sol = self.plan.sol_ms if self.plan else None
        a = Attempt(n, action, by, rel, verdict.accepted, verdict.code, verdict.reason,
                    cand * 1e3 if cand else None, base, (sol / (cand * 1e3)) if sol and cand else None, notes)
        self.attempts.append(a)
        self.save()
        return a

    def save(self) -> None:
        doc = {"version": VERSION, "config": self.config, "plan": self.plan.to_json() if self.plan else None,
               "attempts": [asdict(a) for a in self.attempts], "events": self.events, "usage": asdict(self.usage),
               "guidance": self.guidance, "result": self.result}
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(doc, indent=1, default=str))
        tmp.replace(self.path)  # atomic: a kill mid-write leaves the previous state

    @classmethod
    def load(cls, run_dir: Path) -> RunState:
        path = Path(run_dir) / "run.json"
        try:
            doc = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as e:
            raise AkgError(f"cannot resume from {run_dir}: no readable run.json ({e})") from None
        st = cls(Path(run_dir), doc["config"])
        if doc.get("plan"):
            p = dict(doc["plan"])
            p["groups"] = [GroupPlan(**g) for g in p["groups"]]
            st.plan = Plan(**p)
        st.attempts = [Attempt(**a) for a in doc.get("attempts", [])]
        st.events = doc.get("events", [])
        st.usage = Usage(**doc.get("usage", {}))
        st.guidance = doc.get("guidance", [])
        st.result = doc.get("result", {})
        return st


def trajectory(state: RunState) -> list[dict[str, Any]]:
    """The run as a golden file compares it: who did what and what the verifier said; no times, paths,
    or measured numbers (those vary between machines and runs)."""
    keep = ("agent", "event", "action", "by", "code", "accepted", "why")
    out = [{k: e[k] for k in keep if k in e} for e in state.events]
    for e in out:
        if "why" in e:
            e["why"] = NUMBER.sub("#", e["why"])
    return out


NUMBER = re.compile(r"\d+(?:\.\d+)?(?:e[+-]?\d+)?")
