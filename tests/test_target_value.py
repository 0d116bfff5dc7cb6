"""The target is loaded once per command and passed down as a value (a host CPU's detection reads
/proc and runs lscpu; a GPU's model file is parsed): `akg translate`, `akg verify` and `akg tune` each load
it once, counted where every load happens."""

from __future__ import annotations

from pathlib import Path

import pytest

import hardware_models.spec as spec
from akg_agent.cli import main

ROOT = Path(__file__).resolve().parents[1]
PROBLEM = str(ROOT / "tests" / "problems" / "rule_sum_through_linear.py")


@pytest.fixture
def loads(monkeypatch):
    seen: list[str] = []
    cpu, from_file = spec.detect_cpu, spec.load_file
    monkeypatch.setattr(spec, "detect_cpu", lambda *a, **k: (seen.append("cpu"), cpu(*a, **k))[1])
    monkeypatch.setattr(spec, "load_file", lambda *a, **k: (seen.append("file"), from_file(*a, **k))[1])
    return seen


def test_translate_loads_its_target_once(loads, tmp_path):
    assert main(["translate", PROBLEM, "--dsl", "cpp", "--target", "cpu", "--no-time", "-o",
                 str(tmp_path / "out.py"), "--run-dir", str(tmp_path / "run")]) == 0
    assert loads == ["cpu"]
    loads.clear()
    assert main(["verify", PROBLEM, str(tmp_path / "out.py"), "--target", "cpu"]) == 0
    assert loads == ["cpu"]


def test_tune_loads_its_target_once(loads, tmp_path, monkeypatch):
    monkeypatch.setenv("AKG_CACHE_DIR", str(tmp_path / "cache"))  # a fresh tuning database
    assert main(["tune", PROBLEM, "--dsl", "cpp", "--target", "cpu", "--budget", "1", "-o",
                 str(tmp_path / "tuned.py")]) == 0
    assert loads == ["cpu"]


def test_bench_loads_its_target_once(loads, tmp_path):
    problems = tmp_path / "problems"
    problems.mkdir()
    (problems / "p.py").write_text(Path(PROBLEM).read_text())
    assert main(["bench", str(problems), "--dsl", "cpp", "--target", "cpu", "--baselines", "eager", "--trials", "3",
                 "--out", str(tmp_path / "bench")]) == 0
    assert loads == ["cpu"]
