"""`akg bench`: verified timings, metrics, JSON and HTML outputs."""

from __future__ import annotations

import json
import shutil
import sys

import pytest

from akg_agent.bench.metrics import fast_p, geomean, summarize
from akg_agent.cli import main
from akg_agent.verifier import sol_bound
from akg_agent.verifier.timing import paired_quartiles
from hardware_models.spec import calibrated_path, load_target
from ir.problem import load_problem

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


def test_paired_speedups_divide_out_the_hosts_drift():
    """Trial i of each contender ran in turn i: a host whose pace drifts 16-fold over the run spreads each
    contender's times, not their ratio. A problem is slower beyond noise only where the upper quartile of
    its paired speedups is below 1.0."""
    pace = [1.0, 2.0, 4.0, 8.0, 16.0, 1.5, 3.0]
    eager = [p * 1.0 for p in pace]
    lo, hi = paired_quartiles(eager, [p * 1.25 for p in pace])
    assert lo == pytest.approx(0.8) and hi == pytest.approx(0.8)
    assert paired_quartiles(eager[:3], eager[:3]) is None  # too few turns for quartiles
    noisy = [1.04, 0.9, 1.1, 0.95, 0.97]  # below 1.0 in three turns of five, above in two
    lo, hi = paired_quartiles(eager[:5], [e / r for e, r in zip(eager, noisy)])
    assert lo < 1.0 < hi
    recs = [{"problem": "slow", "correct": True, "speedup": {"eager": 0.8}, "speedup_quartiles": {"eager": [0.8, 0.8]}},
            {"problem": "noisy", "correct": True, "speedup": {"eager": 0.97}, "speedup_quartiles": {"eager": [lo, hi]}},
            {"problem": "wrong", "correct": False, "speedup": {}, "speedup_quartiles": {"eager": [0.5, 0.5]}}]
    assert summarize(recs, ["eager"])["slower_beyond_noise_vs_eager"] == ["slow"]


def test_a_rows_a_a_control_sets_the_noise_its_speedups_are_judged_by():
    """With the run's A/A control (eager timed twice), a row is slower beyond noise only where it is slower
    in three turns of four and further below 1.0 than the two identical modules fell apart, either way:
    the same library call as eager's, 0.99x in a run whose eager-vs-eager spread is 0.98-1.02, is noise,
    and so is 0.986x where the copy ran 0.3-3.2% faster than eager; 0.95x is not."""
    def row(name: str, speedup: float, q: list[float], noise: list[float] | None) -> dict:
        r = {"problem": name, "correct": True, "speedup": {"eager": speedup, "compile": speedup},
             "speedup_quartiles": {"eager": q, "compile": q}}
        return r if noise is None else dict(r, noise_quartiles=noise)
    recs = [row("same_call", 0.99, [0.97, 0.996], [0.98, 1.02]),
            row("slower", 0.95, [0.94, 0.97], [0.98, 1.02]),
            row("faster_turns", 0.99, [0.97, 1.01], [0.995, 1.005]),  # not slower in 3 of 4 turns
            row("copy_faster", 0.986, [0.96, 0.991], [1.003, 1.032]),  # the control's gap, mirrored
            row("beyond_the_gap", 0.96, [0.95, 0.97], [1.003, 1.032]),
            row("no_control", 0.99, [0.97, 0.996], None)]  # runs without the control: the turns alone
    s = summarize(recs, ["eager", "compile"])
    assert s["slower_beyond_noise_vs_eager"] == ["slower", "beyond_the_gap", "no_control"]
    assert s["slower_beyond_noise_vs_compile"] == ["slower", "beyond_the_gap", "no_control"]


def test_a_row_slower_beyond_noise_is_timed_again_with_three_times_the_turns(tmp_path, monkeypatch):
    """The bench times a flagged row again with CONFIRM x the turns; the second timing stands, the first
    is kept beside it; an unflagged row is timed once."""
    from akg_agent.bench import runner

    calls = []

    def fake(p, solution, target, baselines, opts, *rest):
        calls.append((p.stem, opts.trials))
        slow = p.stem == "mm_scalar_mul" and len([c for c in calls if c[0] == p.stem]) == 1
        sp = 0.95 if slow else 1.01
        return {"problem": p.stem, "path": str(p), "correct": True, "speedup": {"eager": sp},
                "speedup_quartiles": {"eager": [sp - 0.01, sp + 0.01 if not slow else 0.96]},
                "noise_quartiles": [0.99, 1.01], "candidate_ms": 1.0 / sp, "baseline_ms": {"eager": 1.0}}

    monkeypatch.setattr(runner, "bench_one", fake)
    sols = tmp_path / "sols"
    sols.mkdir()
    for name in ("mm_scalar_mul", "red_sum_mean"):
        (sols / f"{name}.py").write_text("# a module")
    doc = runner.run_bench([str(problem_path("mm_scalar_mul")), str(problem_path("red_sum_mean"))], "cpu",
                           ["eager"], str(sols), str(tmp_path / "out"), runner.BenchOptions(trials=4))
    assert calls == [("mm_scalar_mul", 4), ("mm_scalar_mul", 12), ("red_sum_mean", 4)]
    rec = {r["problem"]: r for r in doc["records"]}["mm_scalar_mul"]
    assert rec["speedup"]["eager"] == 1.01 and rec["first_pass"]["speedup"]["eager"] == 0.95
    assert doc["summary"]["slower_beyond_noise_vs_eager"] == []
    assert runner.confirmed(rec, {"correct": False, "reason": "timed out"})["confirm_error"] == "timed out"


def test_bench_end_to_end(tmp_path, capsys):
    sols = tmp_path / "sols"
    sols.mkdir()
    shutil.copy(CASES / "genuine_cpp_scale.py", sols / "mm_scalar_mul.py")
    shutil.copy(CASES / "cheat_torch_compute.py", sols / "mm_matvec.py")
    out = tmp_path / "out"
    code = main(["bench", str(problem_path("mm_scalar_mul")), str(problem_path("mm_matvec")),
                 str(problem_path("red_sum_mean")), "--solutions", str(sols), "--out", str(out),
                 "--baselines", "eager", "--trials", "4", "--jobs", "2"])
    assert code == 0
    doc = json.loads((out / "results.json").read_text())
    assert [r["problem"] for r in doc["records"]] == ["mm_scalar_mul", "mm_matvec", "red_sum_mean"]
    assert doc["meta"]["jobs"] == 2
    recs = {r["problem"]: r for r in doc["records"]}
    assert recs["mm_scalar_mul"]["correct"] and recs["mm_scalar_mul"]["speedup"]["eager"] > 0
    assert recs["mm_scalar_mul"]["sol_fraction"] > 0  # the CPU is the target here
    # tests see no calibrated profile: the fractions rest on the detected model's estimates, and say so
    assert "estimates" in doc["meta"]["sol_model"] and "akg hw calibrate" in doc["meta"]["sol_model"]
    assert "speed-of-light from: " in capsys.readouterr().out
    lo, hi = recs["mm_scalar_mul"]["speedup_quartiles"]["eager"]  # paired over the 4 turns
    assert 0 < lo <= hi
    # the A/A control: eager's module timed a second time in the same turns, kept out of the speedups
    lo, hi = recs["mm_scalar_mul"]["noise_quartiles"]
    assert 0 < lo <= hi and list(recs["mm_scalar_mul"]["speedup"]) == ["eager"]
    assert doc["meta"]["baselines"] == ["eager"]
    assert not recs["mm_matvec"]["correct"] and recs["red_sum_mean"]["reason"] == "no solution"
    assert doc["summary"]["problems"] == 3 and doc["summary"]["correct"] == 1
    html = (out / "report.html").read_text()
    assert "<svg" in html and "speedup vs eager" in html and "mm_scalar_mul" in html and "A/A noise" in html
    assert not (out / "results.partial.json").exists()


def test_bench_needs_solutions_or_a_dsl(capsys):
    assert main(["bench", str(problem_path("mm_square"))]) == 2
    assert "pass --solutions DIR" in capsys.readouterr().err


def test_bench_translates_when_given_a_dsl(tmp_path, monkeypatch):
    import akg_agent.bench.runner as runner
    import akg_agent.translate as tr

    calls: list[str] = []
    for mod, name in ((runner, "verify"), (tr, "verify")):
        real = getattr(mod, name)
        monkeypatch.setattr(mod, name, lambda *a, _real=real, _n=mod.__name__, **k: calls.append(_n) or _real(*a, **k))
    out = tmp_path / "out"
    assert main(["bench", str(problem_path("mm_scalar_mul")), "--dsl", "cpp", "--out", str(out),
                 "--baselines", "eager", "--trials", "3"]) == 0
    doc = json.loads((out / "results.json").read_text())
    assert doc["records"][0]["correct"] and (out / "solutions" / "mm_scalar_mul.py").is_file()
    # the written module's input guard, timed on its own: microseconds per call, far below a launch
    guard = doc["records"][0]["guard_us"]
    assert 0 < guard < 50 and doc["summary"]["guard_us_median"] == guard
    assert calls == ["akg_agent.bench.runner"]  # verified once, by the bench's own timed run
    # which strategy the module took, and per fusion group what runs it (from the module's header)
    rec = doc["records"][0]
    assert rec["strategy"] == "rows=fused, conv=library" and rec["groups"] == {"0": "generated pointwise"}
    page = (out / "report.html").read_text()
    assert "<th>strategy</th>" in page and "group 0: generated pointwise" in page


def test_time_waiting_for_the_timing_lock_does_not_count_against_the_limit(tmp_path):
    """A run that notes 3 s spent waiting for the lock finishes under a 2 s limit; one that does not
    note them times out."""
    import subprocess
    import sys

    from akg_agent.verifier.sandbox import communicate

    wait = tmp_path / "lock_wait"
    script = ("import sys, time; from pathlib import Path; p = Path(sys.argv[1]); note = sys.argv[2] == '1'\n"
              "if note: p.write_text(f'0 {time.time()}')\n"
              "t0 = time.time(); time.sleep(3)\n"
              "if note: p.write_text(f'{time.time() - t0} 0')\n"
              "time.sleep(0.3); print('done')")
    for note, finishes in (("1", True), ("0", False)):
        wait.unlink(missing_ok=True)
        proc = subprocess.Popen([sys.executable, "-c", script, str(wait), note], stdout=subprocess.PIPE)
        out = communicate(proc, 2.0, wait)
        if out is None:
            proc.kill()
            proc.communicate()
        assert (out is not None and b"done" in out) == finishes


def _timed_intervals(lock: str | None) -> list[tuple[float, float]]:
    """Two threads time a sleeping callable at once; each trial's (start, end) on the host clock."""
    import threading
    import time

    import torch

    from akg_agent.verifier import timing

    spans: list[tuple[float, float]] = []

    def fn() -> None:
        t0 = time.perf_counter()
        time.sleep(0.01)
        spans.append((t0, time.perf_counter()))

    timing.LOCK_PATH = lock
    try:
        ts = [threading.Thread(target=timing.time_callable, args=(fn, [[]], torch.device("cpu"), 5, 1))
              for _ in range(2)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
    finally:
        timing.LOCK_PATH = None
    return sorted(spans)


def test_timing_lock_keeps_timed_loops_apart(tmp_path):
    def overlaps(spans):
        return sum(b[0] < a[1] for a, b in zip(spans, spans[1:]))

    assert overlaps(_timed_intervals(None)) > 0  # without the lock, two loops do run at once
    assert overlaps(_timed_intervals(str(tmp_path / "lock"))) == 0


def test_timing_waits_for_runs_that_hold_the_gpu(tmp_path):
    """A run building or checking holds the lock shared: another run's timed loop waits for it."""
    import subprocess
    import sys
    import time

    from akg_agent.verifier import timing

    lock = str(tmp_path / "lock")
    holder = ("import sys, time; from akg_agent.verifier import timing; timing.LOCK_PATH = sys.argv[1]; "
              "timing.hold_shared(); print('held', flush=True); time.sleep(1.5)")
    proc = subprocess.Popen([sys.executable, "-c", holder, lock], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    assert proc.stdout.readline().strip() == "held"
    timing.LOCK_PATH, timing.WAIT_PATH = lock, str(tmp_path / "lock_wait")
    try:
        t0 = time.perf_counter()
        with timing.exclusive():
            waited = time.perf_counter() - t0
            with timing.exclusive():  # re-entrant
                pass
    finally:
        timing.LOCK_PATH = timing.WAIT_PATH = None
    proc.wait()
    assert waited > 0.8
    noted, since = map(float, (tmp_path / "lock_wait").read_text().split())  # what the sandbox credits
    assert since == 0 and noted == pytest.approx(waited, abs=0.2)
    timing.WAIT_PATH = str(tmp_path / "lock_wait")
    try:  # what a verification reports beside its timing phase
        assert timing.waited_s() == noted
    finally:
        timing.WAIT_PATH = None



def test_each_gpu_of_a_host_has_its_own_timing_lock_and_the_cpu_has_the_hosts(tmp_path, monkeypatch):
    """Two device actors of one host (Ray gives each its GPU through CUDA_VISIBLE_DEVICES) time side by
    side: a run holding GPU 0 does not hold up a timed loop on GPU 1, while it does one on GPU 0."""
    import subprocess
    import sys
    import time

    from akg_agent.verifier import timing

    monkeypatch.setattr(timing.tempfile, "gettempdir", lambda: str(tmp_path))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    gpu0, host = timing.host_lock("h100"), timing.host_lock("cpu")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1,0")
    gpu1 = timing.host_lock("h100")
    assert len({gpu0, gpu1, host}) == 3 and timing.host_lock("cpu") == host  # the CPU's ignores the GPUs
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    assert timing.host_lock("h100") == gpu0  # Ray's actor on GPU 0 and a driver seeing every GPU agree
    holder = ("import sys, time; from akg_agent.verifier import timing; timing.LOCK_PATH = sys.argv[1]; "
              "timing.hold_shared(); print('held', flush=True); time.sleep(1.5)")
    proc = subprocess.Popen([sys.executable, "-c", holder, gpu0], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    assert proc.stdout.readline().strip() == "held"
    waits = {}
    try:
        for name, lock in (("gpu1", gpu1), ("gpu0", gpu0)):
            timing.LOCK_PATH = lock
            t0 = time.perf_counter()
            with timing.exclusive():
                waits[name] = time.perf_counter() - t0
    finally:
        timing.LOCK_PATH = None
    proc.wait()
    assert waits["gpu1"] < 0.5 < waits["gpu0"]


def test_spearman():
    from akg_agent.bench.rank import spearman

    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert spearman([1, 2, 3, 4, 5], [2, 1, 4, 3, 5]) == pytest.approx(0.8)


def test_bench_times_several_solution_folders_side_by_side(tmp_path, capsys):
    """`--solutions a=DIR,b=DIR`: one run per problem times every label on the same inputs against the same
    baselines; a wrong peer is caught on those inputs, a missing one is 'no solution'."""
    dirs = {lb: tmp_path / lb for lb in ("cpp", "triton", "bad", "lazy")}
    for d in dirs.values():
        d.mkdir()
    shutil.copy(CASES / "genuine_cpp_scale.py", dirs["cpp"] / "mm_scalar_mul.py")
    shutil.copy(CASES / "genuine_triton_scale.py", dirs["triton"] / "mm_scalar_mul.py")
    shutil.copy(CASES / "cheat_wrong_values.py", dirs["bad"] / "mm_scalar_mul.py")
    shutil.copy(CASES / "cheat_torch_compute.py", dirs["lazy"] / "mm_scalar_mul.py")  # right values, torch's
    spec = ",".join(f"{lb}={d}" for lb, d in dirs.items())
    out = tmp_path / "out"
    assert main(["bench", str(problem_path("mm_scalar_mul")), str(problem_path("red_sum_mean")), "--solutions", spec,
                 "--out", str(out), "--baselines", "eager", "--trials", "3"]) == 0
    doc = json.loads((out / "results.json").read_text())
    by = {lb: {r["problem"]: r for r in g["records"]} for lb, g in doc["by_label"].items()}
    # where it came from, and no path of this machine (the solution folders are under /tmp here)
    assert {"commit", "versions", "machine", "command"} <= set(doc["meta"]) and "/tmp/" not in json.dumps(doc["meta"])
    assert list(by) == ["cpp", "triton", "bad", "lazy"]
    main_rec = doc["records"][0]
    assert set(main_rec["peers"]) == {"triton", "bad", "lazy"}  # timed in the cpp solution's run
    assert by["cpp"]["mm_scalar_mul"]["correct"] and by["triton"]["mm_scalar_mul"]["correct"]
    assert by["triton"]["mm_scalar_mul"]["speedup"]["eager"] > 0
    assert by["triton"]["mm_scalar_mul"]["speedup"]["eager"] == pytest.approx(
        main_rec["baseline_ms"]["eager"] / by["triton"]["mm_scalar_mul"]["candidate_ms"])
    assert not by["bad"]["mm_scalar_mul"]["correct"] and "wrong" in by["bad"]["mm_scalar_mul"]["reason"]
    # a side-by-side solution is verified as fully as the main one: torch doing its work is caught
    assert not by["lazy"]["mm_scalar_mul"]["correct"] and "aten.mul" in by["lazy"]["mm_scalar_mul"]["reason"]
    assert all(by[lb]["red_sum_mean"]["reason"] == "no solution" for lb in by)
    assert doc["by_label"]["cpp"]["summary"]["correct"] == 1 and doc["summary"]["correct"] == 1
    printed = capsys.readouterr().out
    assert "side by side" in printed and "bad: correct 0/2" in printed


def test_bench_rejects_a_malformed_solutions_list(tmp_path, capsys):
    assert main(["bench", str(problem_path("mm_scalar_mul")), "--solutions", f"cpp={tmp_path},={tmp_path}"]) == 2
    assert "label=DIR" in capsys.readouterr().err


def test_jobs_are_admitted_while_their_memory_fits():
    """Three jobs of 6, 6 and 12 units on a device of 13: the two small ones overlap, the large one
    (more than the whole device) runs alone."""
    import threading
    import time

    from akg_agent.bench.admission import MemoryGate

    gate, spans, lock = MemoryGate(13), {}, threading.Lock()

    def job(name: str, need: int) -> None:
        with gate.hold(need):
            t0 = time.perf_counter()
            time.sleep(0.2)
            with lock:
                spans[name] = (t0, time.perf_counter())

    ts = [threading.Thread(target=job, args=a) for a in (("a", 6), ("b", 6), ("big", 20))]
    for t in ts:
        t.start()
    for t in ts:
        t.join()

    def overlap(x: str, y: str) -> bool:
        return spans[x][0] < spans[y][1] and spans[y][0] < spans[x][1]

    assert overlap("a", "b") and not overlap("a", "big") and not overlap("b", "big")


def test_a_problems_verification_memory_is_estimated_from_its_sizes():
    from akg_agent.bench.admission import PEAK_FACTOR, verification_bytes

    assert verification_bytes(problem_path("mm_square")) == PEAK_FACTOR * 3 * 64 * 64 * 4
    assert verification_bytes(ROOT / "no_such_problem.py") == 0


def test_bench_pure_times_a_generated_only_translation_beside_the_hybrid(tmp_path):
    out = tmp_path / "out"
    assert main(["bench", str(problem_path("convT2d_grouped")), "--dsl", "cpp", "--pure", "--out", str(out),
                 "--baselines", "eager", "--trials", "3"]) == 0
    doc = json.loads((out / "results.json").read_text())
    rec = doc["records"][0]
    assert rec["main_label"] == "hybrid" and rec["correct"] and set(doc["by_label"]) == {"hybrid", "pure"}
    # C++ generates no grouped transposed convolution: the pure translation is missing, and says why
    assert not (out / "solutions-pure" / "convT2d_grouped.py").exists()
    assert "--pure" in (out / "solutions-pure" / "convT2d_grouped.error.txt").read_text()


def test_a_waiting_timer_goes_before_runs_that_arrive_after_it(tmp_path):
    """Runs that start building while a timed loop waits queue behind it: with flock alone they would
    be let in beside the first holder, and with enough runs side by side the timer would never get in."""
    import subprocess
    import sys
    import threading
    import time

    from akg_agent.verifier import timing

    lock = str(tmp_path / "lock")
    holder = ("import sys, time; from akg_agent.verifier import timing; timing.LOCK_PATH = sys.argv[1]; "
              "print('ready', flush=True); sys.stdin.readline(); "
              "timing.hold_shared(); print(time.time(), flush=True); time.sleep(float(sys.argv[2]))")
    procs = [subprocess.Popen([sys.executable, "-c", holder, lock, hold], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, cwd=ROOT) for hold in ("1.5", "0")]
    first, late = procs
    for p in procs:
        assert p.stdout.readline().strip() == "ready"
    first.stdin.write("go\n")
    first.stdin.flush()
    first.stdout.readline()  # it holds the lock shared for 1.5 s
    timed: list[float] = []

    def timer() -> None:
        with timing.exclusive():
            timed.append(time.time())
            time.sleep(0.5)
            timed.append(time.time())

    timing.LOCK_PATH = lock
    try:
        t = threading.Thread(target=timer)
        t.start()
        time.sleep(0.4)  # the timer now waits for the first holder
        late.stdin.write("go\n")
        late.stdin.flush()
        got_in = float(late.stdout.readline())
        t.join()
    finally:
        timing.LOCK_PATH = None
    for p in procs:
        p.stdin.close()
        p.wait()
    assert timed and got_in >= timed[1] - 0.05  # the late run waited for the whole timed loop


def test_peers_share_one_float64_reference(monkeypatch):
    """Side-by-side solutions are checked on the timing inputs against one float64 evaluation of the
    reference, not one each (at real sizes each takes seconds to a minute); a wrong peer is still caught."""
    import torch

    from akg_agent.verifier import timed
    from ir.problem import load_problem

    monkeypatch.setenv("TRITON_INTERPRET", "1")  # what the sandbox sets on a machine without a GPU
    calls: list[int] = []
    real = timed.float64_outputs
    monkeypatch.setattr(timed, "float64_outputs", lambda ref, xs: calls.append(1) or real(ref, xs))
    problem = load_problem(problem_path("mm_scalar_mul"))
    ref = problem.module.Model(*problem.get_init_inputs())
    sets = [problem.make_inputs(1000, device=torch.device("cpu"))]
    expected = timed._expected(ref, sets)  # what time_candidate hands every peer
    results = [timed._peer(i, CASES / name, problem, ref, sets, torch.device("cpu"), expected)
               for i, name in enumerate(["genuine_cpp_scale.py", "genuine_triton_scale.py", "cheat_wrong_values.py"])]
    assert len(calls) == 1
    assert results[0][0] is not None and results[1][0] is not None
    assert results[2][0] is None and "wrong values" in results[2][1]["error"]


def test_a_merge_recomputes_speed_of_light_from_a_calibration_the_run_did_not_have(tmp_path, monkeypatch):
    """merge_bench --sol-now: the timings as measured, each fraction of speed-of-light (the peers' too) from
    the target's model as it is now; here a profile with twice the detected bandwidth and peak."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("merge_bench", ROOT / "benchmarks/realsize/merge_bench.py")
    mb = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mb)
    monkeypatch.setenv("AKG_CACHE_DIR", str(tmp_path / "cache"))
    path = problem_path("red_sum_mean")
    before = sol_bound(load_problem(path), "cpu")
    run = tmp_path / "run"
    run.mkdir()
    rec = {"problem": "red_sum_mean", "path": str(path), "correct": True, "candidate_ms": 1.0, "sol_ms": 5.0,
           "sol_fraction": 5.0, "speedup": {"eager": 1.0}, "peers": {"pure": {"correct": True, "candidate_ms": 2.0}}}
    meta = {"target": "cpu", "baselines": ["eager"], "solutions": f"hybrid={run},pure={run}"}
    (run / "results.json").write_text(json.dumps({"meta": meta, "records": [rec]}))
    m = load_target("cpu")
    cal = calibrated_path("cpu")
    cal.parent.mkdir(parents=True)
    cal.write_text(json.dumps({"device": "test", "date": "today", "figures": {
        "memory.dram_bw": 2 * m.dram_bw, "compute.vector.f32": 2 * m.peak("vector", "f32")}}))
    monkeypatch.setattr(sys, "argv", ["merge_bench", str(tmp_path / "merged"), str(run), "--sol-now"])
    assert mb.main() == 0
    doc = json.loads((tmp_path / "merged.json").read_text())
    (r,) = doc["records"]
    assert r["sol_ms"] < 0.6 * before * 1e3 and r["sol_fraction"] == pytest.approx(r["sol_ms"] / 1.0)
    assert r["peers"]["pure"]["sol_fraction"] == pytest.approx(r["sol_ms"] / 2.0)
    assert "calibrated on test" in doc["meta"]["sol_model"] and "--sol-now" in doc["meta"]["sol_model"]
