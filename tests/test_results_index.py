"""The results archive: INDEX.md is what the script writes from the files there, nothing lies loose, the
newest whole run of a set is in latest/, and no meta carries a machine path. Results record where they
came from (commit, versions, machine, command)."""

from __future__ import annotations

import json
import subprocess
import sys

from akg_agent.bench.provenance import ROOT as PROJECT
from akg_agent.bench.provenance import provenance, scrub

from .conftest import ROOT

SCRIPT = ROOT / "benchmarks" / "results_index.py"


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=120)


def test_the_repositorys_index_is_up_to_date():
    r = _run("--check")
    assert r.returncode == 0, r.stdout


def _bench(path, date, n, solutions="cpp=/tmp/s24/run/cpp"):
    path.write_text(json.dumps({"meta": {"date": date, "dsl": "cpp", "solutions": solutions,
                                         "runs": ["/tmp/s24/a", str(PROJECT / "runs" / "b")]},
                                "summary": {"problems": n, "correct": n, "geomean_speedup_vs_eager": 1.5},
                                "records": [{}] * n}))


def test_reorganize_keeps_the_newest_whole_run_and_archives_the_rest(tmp_path):
    _bench(tmp_path / "cpu-cpp-realsize-old-2026-11-20.json", "2026-11-20 10:00:00", 55)
    (tmp_path / "cpu-cpp-realsize-old-2026-11-20.html").write_text("<html/>")
    _bench(tmp_path / "cpu-cpp-realsize-new-2026-11-20.json", "2026-11-20 18:00:00", 55)
    _bench(tmp_path / "cpu-cpp-realsize-subset-2026-11-21.json", "2026-11-21 09:00:00", 12)  # part of the set
    (tmp_path / "cpu-cpp-realsize-new-2026-11-20.partial.json").write_text("[{}]")  # its run finished
    (tmp_path / "cpu-cpp-killed-2026-11-21.partial.json").write_text("[{}]")  # never finished: kept
    (tmp_path / "h100-probe-2026-11-22.txt").write_text("an experiment")
    assert _run("--root", str(tmp_path), "--reorganize").returncode == 0
    latest = sorted(p.name for p in (tmp_path / "latest").iterdir())
    assert latest == ["cpu-cpp-realsize-new-2026-11-20.json"]
    archive = sorted(p.name for p in (tmp_path / "archive").iterdir())
    assert archive == ["cpu-cpp-killed-2026-11-21.partial.json", "cpu-cpp-realsize-old-2026-11-20.html",
                       "cpu-cpp-realsize-old-2026-11-20.json", "cpu-cpp-realsize-subset-2026-11-21.json",
                       "h100-probe-2026-11-22.txt"]
    meta = json.loads((tmp_path / "latest" / latest[0]).read_text())["meta"]
    assert meta["solutions"] == "cpp=cpp" and meta["runs"] == ["a", "runs/b"]
    index = (tmp_path / "INDEX.md").read_text()
    assert "| cpu | realsize | cpp | fp32 | 2026-11-20 | not recorded | 55/55 correct, 1.5x eager |" in index
    assert index.count("](archive/") == 5
    assert _run("--root", str(tmp_path), "--check").returncode == 0
    (tmp_path / "cpu-cpp-realsize-newer-2026-11-23.json").write_text("{}")  # a new result left loose
    assert _run("--root", str(tmp_path), "--check").returncode == 1


def test_provenance_names_commit_versions_machine_and_command_without_paths():
    p = provenance(["/somewhere/.venv/bin/akg", "bench", str(PROJECT / "tests" / "problems"), "--solutions",
                    "a=/tmp/akg-x/sol"])
    assert p["command"] == "akg bench tests/problems --solutions a=sol"
    assert p["versions"]["torch"] and p["versions"]["python"] and p["machine"]["cores"] >= 1
    assert p["commit"] is None or len(p["commit"].split("+")[0]) == 40
    assert scrub("x=/tmp/run/out.json y") == "x=out.json y"


def test_reorganize_never_moves_a_result_over_another_of_the_same_name(tmp_path):
    (tmp_path / "archive").mkdir()
    _bench(tmp_path / "archive" / "h200-cpp-realsize-subset-2026-11-30.json", "2026-11-30 09:00:00", 12)
    (tmp_path / "archive" / "h200-cpp-realsize-subset-2026-11-30.html").write_text("<html>first</html>")
    _bench(tmp_path / "h200-cpp-realsize-subset-2026-11-30.json", "2026-11-30 15:00:00", 11)  # a later run, loose
    (tmp_path / "h200-cpp-realsize-subset-2026-11-30.html").write_text("<html>second</html>")
    assert _run("--root", str(tmp_path), "--reorganize").returncode == 0
    archive = sorted(p.name for p in (tmp_path / "archive").iterdir())
    assert archive == ["h200-cpp-realsize-subset-2026-11-30-r2.html", "h200-cpp-realsize-subset-2026-11-30-r2.json",
                       "h200-cpp-realsize-subset-2026-11-30.html", "h200-cpp-realsize-subset-2026-11-30.json"]
    assert json.loads((tmp_path / "archive" / archive[1]).read_text())["summary"]["problems"] == 11
    assert (tmp_path / "archive" / archive[2]).read_text() == "<html>first</html>"
    assert _run("--root", str(tmp_path), "--check").returncode == 0


def test_kernelbench_levels_are_sets_apart(tmp_path):
    """A level-2 run is not a newer level-1 run: each level's newest whole run stays in latest/."""
    _bench(tmp_path / "cpu-cpp-kernelbench-l1-every4-2026-11-20.json", "2026-11-20 10:00:00", 25)
    _bench(tmp_path / "cpu-cpp-kernelbench-l2-every4-2026-11-21.json", "2026-11-21 10:00:00", 25)
    assert _run("--root", str(tmp_path), "--reorganize").returncode == 0
    assert sorted(p.name for p in (tmp_path / "latest").iterdir()) == [
        "cpu-cpp-kernelbench-l1-every4-2026-11-20.json", "cpu-cpp-kernelbench-l2-every4-2026-11-21.json"]
