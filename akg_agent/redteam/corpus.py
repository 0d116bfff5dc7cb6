"""The attack corpus: `attacks/*.py`, each a piece of Python appended to an honest module (one that
defines `ModelNew`), with a `REDTEAM` dict saying which published class it belongs to and why the
verifier must reject it (`expect`: the rejection code, or codes where the device decides which check
fires first; `match`: a phrase of the reason).

An attack wraps the honest `ModelNew` it is appended to (its parameters and state_dict unchanged), so
one attack applies to every problem's module in every DSL. `params` lists values an attack is replayed
with (its mutations): each is a module-level name set before the attack's code; `BATCH` is given the
problem's first input's leading size by the runner."""

from __future__ import annotations

import ast
import itertools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ATTACKS = Path(__file__).with_name("attacks")


@dataclass(frozen=True)
class Attack:
    name: str
    cls: str  # the published exploit class
    expect: tuple[str, ...]  # the verifier's rejection codes, any of which is the right reason
    match: tuple[str, ...]  # phrases of its one-line reason, any of which (beside its code) names it
    code: str
    timed: bool = False  # needs a timed verification (baselines) to show
    gpu: bool = False  # needs a CUDA device
    cpu: bool = False  # aimed at the host clock: on a GPU, where events time the device, it gains nothing
    params: dict[str, list[Any]] = field(default_factory=dict)

    def caught(self, accepted: bool, code: str, reason: str) -> bool:
        """Whether a verdict rejects this attack for its reason."""
        return not accepted and code in self.expect and any(m in reason for m in self.match)

    def variants(self) -> list[dict[str, Any]]:
        """Every combination of the attack's parameter values (one empty one where it has none)."""
        keys = sorted(self.params)
        return [dict(zip(keys, vals)) for vals in itertools.product(*(self.params[k] for k in keys))]

    def apply(self, honest: str, values: dict[str, Any]) -> str:
        """The candidate module: the honest source, the parameter values, then the attack."""
        head = "".join(f"{k} = {v!r}\n" for k, v in sorted(values.items()))
        return f"{honest.rstrip()}\n\n\n# --- red-team attack: {self.name} ({self.cls})\n{head}{self.code}"


def _meta(path: Path) -> dict[str, Any]:
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "REDTEAM" for t in node.targets):
            return ast.literal_eval(node.value)
    raise ValueError(f"{path.name} has no REDTEAM dict")


def load(gpu: bool | None = None) -> list[Attack]:
    """The corpus, by name; `gpu`: only the attacks that need (True) or do not need (False) a GPU."""
    out = []
    for path in sorted(ATTACKS.glob("*.py")):
        m = _meta(path)
        expect = (m["expect"],) if isinstance(m["expect"], str) else tuple(m["expect"])
        match = (m["match"],) if isinstance(m["match"], str) else tuple(m["match"])
        a = Attack(path.stem, m["cls"], expect, match, path.read_text(), bool(m.get("timed")),
                   bool(m.get("gpu")), bool(m.get("cpu")), dict(m.get("params", {})))
        if gpu is None or a.gpu == gpu:
            out.append(a)
    return out
