"""Generated against library, measured once where the untuned plan lost to eager (`library_check`): the
module with every generated op family left to torch is timed beside it, the faster is written, both times
go to the tuning database and the next translate reads the choice. Timings are scripted here (verdicts
with the verifier's timing details), so each branch is tested without a clock: the CLI's loop, translate's
API and the bench take the same decision."""

from __future__ import annotations

import json

import pytest

from akg_agent.agents import RunConfig, run
from akg_agent.bench.library_retry import library_measured
from akg_agent.library_check import alternative_for, library_alternative, measured_choice
from akg_agent.translate import build, measured_as
from akg_agent.tuning_db import TuningDB
from akg_agent.verifier import Verdict

ATTENTION = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v) * 2.0


def get_inputs():
    return [torch.randn(2, 2, 16, 8), torch.randn(2, 2, 16, 8), torch.randn(2, 2, 16, 8)]


def get_init_inputs():
    return []
'''


def _timed(module_s: float, eager_s: float = 1e-3) -> Verdict:
    return Verdict(True, "ok", "matches the reference", {"timing": {"candidate": {"median_s": module_s},
                                                                    "eager": {"median_s": eager_s}}})


@pytest.fixture()
def problem(tmp_path, monkeypatch):
    monkeypatch.setenv("AKG_CACHE_DIR", str(tmp_path / "cache"))  # a fresh tuning database
    path = tmp_path / "attn.py"
    path.write_text(ATTENTION)
    return path


def test_the_alternative_leaves_every_generated_family_to_torch_and_only_after_a_loss(problem):
    t = build(problem, "cpp", "cpu")
    assert not t.strategy.library and any(k.kind == "attention" for k in t.program.kernels())
    alt = alternative_for(t)
    assert alt is not None and "attention" in alt.library and (alt.rows, alt.conv) == (t.strategy.rows, t.strategy.conv)
    for module_s, wanted in ((1.0e-3, None), (1.04e-3, None), (1.2e-3, alt)):  # within noise of eager: kept
        t.verdict = _timed(module_s)
        assert library_alternative(t) == wanted


@pytest.mark.parametrize("library_s", [0.9e-3, 1.5e-3])
def test_translate_keeps_the_faster_and_the_next_build_reads_the_database(problem, library_s):
    t = build(problem, "cpp", "cpu")
    t.verdict = _timed(1.3e-3)
    built = []

    def rebuilt(s):
        built.append(s)
        return build(problem, "cpp", "cpu", rows=s.rows, conv=s.conv, library=s.library)

    def checked(x):
        x.verdict = _timed(library_s)

    chosen = measured_choice(t, rebuilt, checked, measured_as)
    assert len(built) == 1
    library_won = library_s < 1.3e-3
    assert ("attention" in chosen.strategy.library) == library_won
    assert chosen.notes[-1].startswith("measured library against generated: generated 1.30x eager's time")
    assert chosen.notes[-1].endswith("the library's kept (the tuning database keeps both)" if library_won else
                                     "generated kept")
    again = build(problem, "cpp", "cpu")  # the database's fastest, not the cost model's
    assert again.strategy_s is not None and ("attention" in again.strategy.library) == library_won
    assert library_alternative(again) is None  # measured once: never again for this problem


def test_the_cli_measures_the_library_as_a_second_attempt_and_writes_the_faster(problem, tmp_path, monkeypatch):
    import akg_agent.agents.loop as loop

    times = iter([2.0e-3, 1.1e-3])  # the rules' module, then the library's
    seen = []

    def fake_verify(cfg, t, path, by):
        seen.append(path.read_text())
        return _timed(next(times))

    monkeypatch.setattr(loop, "_verify", fake_verify)
    out = tmp_path / "out.py"
    st = run(RunConfig(str(problem), "cpp", "cpu", out=str(out), run_dir=str(tmp_path / "run")), db=TuningDB())
    assert [a.action for a in st.attempts] == ["write", "strategy"] and st.result["attempt"] == 2
    assert "library call torch attention" in seen[1] and "library call torch attention" not in seen[0]
    text = out.read_text()
    assert "# note: measured library against generated: generated 2.00x eager's time, 1.10x with attention" in text
    # the first attempt's file says what was measured beside it too
    assert "measured library against generated" in (tmp_path / "run" / "attempt_1.py").read_text()
    assert json.loads((tmp_path / "run" / "run.json").read_text())["attempts"][1]["by"] == "rules"


def test_the_bench_benches_the_library_module_and_replaces_a_slower_solution(problem, tmp_path):
    solution = tmp_path / "sol.py"
    solution.write_text("# the bench's translation\n")
    slow = {"problem": "attn", "correct": True, "speedup": {"eager": 0.7}, "speedup_quartiles": {"eager": [0.68, 0.72]},
            "noise_quartiles": [0.97, 1.03], "baseline_ms": {"eager": 1.0}, "reason": "ok"}
    benched = []

    def bench(path):
        benched.append(path.read_text())
        return {"correct": True, "speedup": {"eager": 0.99}, "reason": "ok"}

    rec = library_measured(problem, "cpp", build(problem, "cpp", "cpu").target, solution, slow, bench)
    assert rec["library_measured"]["kept"] == "library" and rec["speedup"]["eager"] == 0.99
    assert "library call torch attention" in benched[0] and solution.read_text() == benched[0].replace(
        "# plan:", "# note: measured library against generated: generated 1.43x eager's time, 1.01x with attention "
        "left to torch: the library's kept\n# plan:")
    # a row within noise of eager is left alone: nothing benched
    fine = dict(slow, speedup={"eager": 0.97}, speedup_quartiles={"eager": [0.95, 1.01]})
    assert library_measured(problem, "cpp", "cpu", solution, fine, bench) is fine and len(benched) == 1


def test_a_library_strategy_that_cannot_be_planned_leaves_the_generated_module(problem):
    from ir.errors import AkgError

    t = build(problem, "cpp", "cpu")
    t.verdict = _timed(2e-3)

    def refuse(s):
        raise AkgError("no library call for this family here")

    kept = measured_choice(t, refuse, lambda x: None, measured_as)
    assert kept is t
    assert kept.notes[-1] == "library against generated not measured: no library call for this family here"
