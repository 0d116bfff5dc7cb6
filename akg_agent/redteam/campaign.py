"""`akg redteam`: attacks on the verifier, for one problem. Offline, the corpus replayed with its mutations
against the problem's honest module (the rules engine's translation, or one given); with a model, the model
plays the attacker over several rounds, told each verdict. Every attack the verifier accepts is a breach:
its module is saved beside a pytest file that fails until the verifier rejects it."""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from akg_agent.agents.llm import Model
from akg_agent.agents.parse import ReplyError, extract_module
from akg_agent.verifier import Verdict, verify
from akg_agent.verifier.sandbox import Limits
from prompts import render

from .corpus import Attack, load

TRIALS = 5  # timed trials per attack: enough for a ratio, short enough for a corpus in a minute


@dataclass
class Outcome:
    """One attack's verdict: `held` where the verifier rejected it (`as_expected` where for the corpus's reason)."""

    name: str
    source: str  # "corpus" or the model's name
    accepted: bool
    code: str
    reason: str
    as_expected: bool | None = None  # None for a model's attack: it states no expected reason
    test: str | None = None  # the failing test written for a breach

    @property
    def held(self) -> bool:
        return not self.accepted


@dataclass
class Campaign:
    problem: Path
    honest: str  # the honest module's source
    target: str
    out: Path
    limits: Limits = field(default_factory=lambda: Limits(timeout_s=120))
    outcomes: list[Outcome] = field(default_factory=list)

    def _verify(self, name: str, source: str, timed: bool) -> tuple[Path, Verdict]:
        path = self.out / "attacks" / f"{name}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source)
        return path, verify(self.problem, path, target=self.target, timing=timed,
                            baselines=("eager",) if timed else (), trials=TRIALS, limits=self.limits)

    def replay(self, attacks: list[Attack], batch: int | None) -> list[Outcome]:
        """Every corpus attack in every mutation against the honest module (`batch`: the problem's first input's
        leading size, given to attacks that take a BATCH)."""
        got = []
        for a in attacks:
            for i, values in enumerate(a.variants()):
                if "BATCH" in values and batch is not None:
                    values = dict(values, BATCH=batch)
                name = a.name if len(a.params) == 0 else f"{a.name}_{i}"
                path, v = self._verify(name, a.apply(self.honest, values), a.timed)
                o = Outcome(name, "corpus", v.accepted, v.code, v.reason,
                            as_expected=a.caught(v.accepted, v.code, v.reason))
                got.append(self._record(o, path, a.timed))
        return got

    def play(self, model: Model, rounds: int, dsl: str) -> list[Outcome]:
        """The model attacks for `rounds` rounds, each told the verdicts so far."""
        system = render("redteam.j2", problem=self.problem.read_text(), honest=self.honest, dsl=dsl,
                        classes=sorted({a.cls for a in load()}))
        messages: list[dict[str, str]] = [{"role": "user", "content": "Write your first attack."}]
        got = []
        for r in range(rounds):
            reply = model.complete(system, messages)
            try:
                source = extract_module(reply.text)
            except ReplyError as e:
                messages += [{"role": "assistant", "content": reply.text},
                             {"role": "user", "content": f"No module found ({e}). Write a whole module."}]
                continue
            path, v = self._verify(f"model_round_{r + 1}", source, True)
            got.append(self._record(Outcome(f"model_round_{r + 1}", model.name, v.accepted, v.code, v.reason),
                                    path, True))
            messages += [{"role": "assistant", "content": reply.text},
                         {"role": "user", "content": f"The verifier said: {v.line()}\nTry another attack."}]
        return got

    def _record(self, o: Outcome, path: Path, timed: bool) -> Outcome:
        if o.accepted:
            o.test = str(write_failing_test(self.out, self.problem, path, self.target, timed))
        self.outcomes.append(o)
        return o

    def report(self) -> dict[str, Any]:
        doc = {"problem": str(self.problem), "target": self.target, "attacks": len(self.outcomes),
               "held": sum(o.held for o in self.outcomes),
               "breaches": [o.name for o in self.outcomes if o.accepted],
               "other_reason": [o.name for o in self.outcomes if o.held and o.as_expected is False],
               "outcomes": [asdict(o) for o in self.outcomes]}
        (self.out / "report.json").write_text(json.dumps(doc, indent=2))
        return doc


TEST = '''"""A breach found by `akg redteam`: the verifier accepted this attack. The test fails until it rejects it."""
from pathlib import Path

from akg_agent.verifier import Verdict, verify

HERE = Path(__file__).parent


def test_{name}_is_rejected():
    v = verify(HERE / {problem!r}, HERE / "attacks" / {cand!r}, target={target!r}, timing={timed!r},
               baselines={baselines!r}, trials={trials!r})
    assert not v.accepted, "the verifier accepts this attack: " + v.line()
'''


def write_failing_test(out: Path, problem: Path, cand: Path, target: str, timed: bool) -> Path:
    """A pytest file beside the attack (the problem copied in, so the folder stands alone)."""
    shutil.copyfile(problem, out / problem.name)
    name = re.sub(r"\W", "_", cand.stem)
    test = out / f"test_breach_{name}.py"
    test.write_text(TEST.format(name=name, problem=problem.name, cand=cand.name, target=target, timed=timed,
                                baselines=("eager",) if timed else (), trials=TRIALS))
    return test
