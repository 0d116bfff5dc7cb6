"""`akg bench`: verified timings, metrics, JSON and HTML outputs."""

from __future__ import annotations

import json
import shutil

import pytest

from akg_agent.bench.metrics import fast_p, geomean, summarize
from akg_agent.cli import main

from .conftest import ROOT, problem_path

CASES = ROOT / "tests" / "verifier_cases"


def test_fast_p_and_geomean():
    recs = [{"correct": True, "speedup": {"eager": 2.5}}, {"correct": True, "speedup": {"eager": 0.5}},
            {"correct": False, "speedup": {"eager": 9.0}}, {"correct": False}]
    assert fast_p(recs, "eager", 0.0) == 0.5
    assert fast_p(recs, "eager", 1.0) == 0.25 and fast_p(recs, "eager", 2.0) == 0.25
    assert geomean([2.5, 0.5]) == pytest.approx(1.118, rel=1e-3)
    s = summarize(recs, ["eager"])
    assert s["correct"] == 2 and s["fast_p_vs_eager"]["1.5"] == 0.25


def test_bench_end_to_end(tmp_path, capsys):
    sols = tmp_path / "sols"
    sols.mkdir()
    shutil.copy(CASES / "genuine_cpp_scale.py", sols / "mm_scalar_mul.py")
    shutil.copy(CASES / "cheat_torch_compute.py", sols / "mm_matvec.py")
    out = tmp_path / "out"
    code = main(["bench", str(problem_path("mm_scalar_mul")), str(problem_path("mm_matvec")),
                 str(problem_path("red_sum_mean")), "--solutions", str(sols), "--out", str(out),
                 "--baselines", "eager", "--trials", "3"])
    assert code == 0
    doc = json.loads((out / "results.json").read_text())
    recs = {r["problem"]: r for r in doc["records"]}
    assert recs["mm_scalar_mul"]["correct"] and recs["mm_scalar_mul"]["speedup"]["eager"] > 0
    assert recs["mm_scalar_mul"]["sol_fraction"] > 0  # the CPU is the target here
    assert not recs["mm_matvec"]["correct"] and recs["red_sum_mean"]["reason"] == "no solution"
    assert doc["summary"]["problems"] == 3 and doc["summary"]["correct"] == 1
    html = (out / "report.html").read_text()
    assert "<svg" in html and "speedup vs eager" in html and "mm_scalar_mul" in html
    assert not (out / "results.partial.json").exists()


def test_bench_needs_solutions_or_a_dsl(capsys):
    assert main(["bench", str(problem_path("mm_square"))]) == 2
    assert "pass --solutions DIR" in capsys.readouterr().err


def test_bench_translates_when_given_a_dsl(tmp_path):
    out = tmp_path / "out"
    assert main(["bench", str(problem_path("mm_scalar_mul")), "--dsl", "cpp", "--out", str(out),
                 "--baselines", "eager", "--trials", "3"]) == 0
    doc = json.loads((out / "results.json").read_text())
    assert doc["records"][0]["correct"] and (out / "solutions" / "mm_scalar_mul.py").is_file()


def test_spearman():
    from akg_agent.bench.rank import spearman

    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert spearman([1, 2, 3, 4, 5], [2, 1, 4, 3, 5]) == pytest.approx(0.8)
