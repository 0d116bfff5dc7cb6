"""The verifier: adversarial candidates are each rejected for the right reason; genuine kernels
(Triton through the interpreter, C++, a declared library call) are accepted."""

from __future__ import annotations

import math
import subprocess
import sys

import pytest
import torch

from akg_agent.cli import main
from akg_agent.verifier import candidate, verify
from akg_agent.verifier.candidate import compare_chunked as _compare
from akg_agent.verifier.candidate import fingerprint as _fingerprint
from akg_agent.verifier.guard import AtenGuard, undeclared
from akg_agent.verifier.policy import TolerancePolicy, compare, is_degenerate
from akg_agent.verifier.sandbox import Limits
from akg_agent.verifier.timing import Timing, side_stream_suspected, time_callable

from .conftest import ROOT, problem_path

CASES = ROOT / "tests" / "verifier_cases"
SCALE = problem_path("mm_scalar_mul")

REJECTIONS = [
    ("cheat_wrong_values", SCALE, "wrong_values", "values off"),
    ("cheat_nan_placement", SCALE, "wrong_values", "NaN in 1 places"),
    ("cheat_replay", SCALE, "replayed", "repeats an earlier answer"),
    ("cheat_first_seed_only", SCALE, "wrong_values", "special-cased"),
    ("cheat_input_write", SCALE, "input_mutated", "writes into input 0"),
    ("cheat_stale_memory", SCALE, "stale_memory", "uninitialised or stale memory"),
    ("cheat_torch_compute", SCALE, "torch_compute", "aten.mul.Tensor"),
    ("cheat_hang", SCALE, "timeout", "timed out"),
    ("cheat_crash", SCALE, "crash", "SIGSEGV"),
    ("cheat_abort_message", SCALE, "crash", "(SIGABRT): F1130 fatal: the runtime was started before fork"),
    ("cheat_memory_hog", SCALE, "memory", "memory limit"),
    ("cheat_network", SCALE, "network", "not allowed in the verifier sandbox"),
    ("cheat_bad_state_dict", SCALE, "state_dict", "not state_dict-compatible"),
    ("cheat_syntax_error", SCALE, "compile_error", "does not compile"),
    ("cheat_no_modelnew", SCALE, "no_modelnew", "no ModelNew"),
    ("cheat_zeros_on_degenerate", problem_path("softmax_wide_degenerate"), "degenerate", "degenerate reference"),
]


@pytest.mark.parametrize("case,ref,code,text", REJECTIONS, ids=[r[0] for r in REJECTIONS])
def test_adversarial_candidates_are_rejected_for_the_right_reason(case, ref, code, text):
    # the hanging candidate waits out its limit: a short one (the others need time to build and run)
    v = verify(ref, CASES / f"{case}.py", limits=Limits(timeout_s=8 if case == "cheat_hang" else 25))
    assert not v.accepted
    assert v.code == code, v.line()
    assert text in v.reason and "\n" not in v.reason


@pytest.mark.parametrize("case,ref", [
    ("genuine_triton_scale", SCALE),
    ("genuine_cpp_scale", SCALE),
    ("genuine_triton_softmax", problem_path("softmax_wide_degenerate")),
])
def test_genuine_kernels_are_accepted(case, ref):
    v = verify(ref, CASES / f"{case}.py")
    assert v.accepted, v.line()
    assert v.details["torch_ops_used"] == []  # the kernels do all the compute


def test_degenerate_reference_is_flagged_and_checked_relatively():
    v = verify(problem_path("softmax_wide_degenerate"), CASES / "genuine_triton_softmax.py")
    assert v.accepted and v.details["degenerate_outputs"] == [0]


def test_declared_library_call_is_allowed_and_reported():
    v = verify(problem_path("l2_conv_relu_biasadd"), CASES / "genuine_conv_library_epilogue.py")
    assert v.accepted, v.line()
    assert any(op.startswith("aten.convolution") for op in v.details["torch_ops_used"])
    assert "aten.convolution" in v.details["library_calls"]


def test_cli_exit_codes(capsys):
    assert main(["verify", str(SCALE), str(CASES / "genuine_triton_scale.py")]) == 0
    assert capsys.readouterr().out.startswith("accepted: ")
    assert main(["verify", str(SCALE), str(CASES / "cheat_replay.py")]) == 1
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1 and out[0].startswith("rejected: ")
    assert main(["verify", str(SCALE), str(CASES / "missing.py")]) == 2


def test_timing_and_baselines_on_cpu(capsys):
    assert main(["verify", str(SCALE), str(CASES / "genuine_cpp_scale.py"), "--baselines", "eager", "--json",
                 "--trials", "5"]) == 0
    import json

    doc = json.loads(capsys.readouterr().out)
    t = doc["details"]["timing"]
    assert t["candidate"]["trials"] == 5 and t["eager"]["median_s"] > 0


# --- the policy, the guard and the timer on their own
def test_tolerance_includes_the_references_own_error():
    r64 = torch.linspace(1, 2, 100, dtype=torch.float64)
    ref = (r64 + 5e-4).float()  # a TF32-like reference, 5e-4 off the exact answer
    exact = r64.float()
    assert compare(exact, ref, TolerancePolicy(), ref64=r64).ok
    assert not compare(exact, ref, TolerancePolicy()).ok  # without the float64 reference it would fail


def test_the_rounding_floor_is_the_references_largest_own_error():
    """A GEMM summed in another order: torch's rounding cancels at one element, ours does not."""
    r64 = torch.randn(4096, dtype=torch.float64) * 100
    noise = torch.randn(4096, dtype=torch.float64) * 3e-4
    noise[7] = 0.0
    ref = (r64 + noise).float()
    r64[7] = 0.0  # a value near zero: atol + rtol|x| is 1e-4 there
    ref[7] = 0.0
    cand = ref.clone()
    cand[7] = 5e-4  # within torch's own error elsewhere, outside atol + rtol|x| + its error at 7
    assert compare(cand, ref, TolerancePolicy(), ref64=r64).ok
    cand[7] = 5e-3  # ten times torch's worst: a bug, not rounding
    assert not compare(cand, ref, TolerancePolicy(), ref64=r64).ok
    # an exact reference leaves no floor: a TF32-like candidate is still rejected
    tf32 = (r64 * (1 + 1e-3 * torch.randn_like(r64))).float()
    assert not compare(tf32, r64.float(), TolerancePolicy(), ref64=r64).ok


def test_an_fp32_value_may_err_up_to_twice_torchs_largest_error_past_the_tolerance():
    """An ill-conditioned fp32 output (a batch norm's weight gradient: torch itself 0.6 off): another order,
    as accurate, errs more than torch's largest about half the time (a GRU's output at 1.1x torch's), so
    the floor is twice torch's largest own error; three times is a bug."""
    r64 = torch.randn(64, dtype=torch.float64)
    ref = r64.clone()
    ref[3] += 0.6  # torch's own worst
    ref = ref.float()
    cand = r64.float().clone()
    cand[5] += 0.8  # as accurate elsewhere: 0.8 > 0.6 at one value
    assert compare(cand, ref, TolerancePolicy(), ref64=r64).ok
    cand[5] += 1.0  # 1.8: three times torch's worst
    assert not compare(cand, ref, TolerancePolicy(), ref64=r64).ok


def test_a_degenerate_output_may_carry_rounding_noise_like_the_references():
    """The mean of a group norm's output is zero; torch returns noise near 1e-9, and so may we."""
    r64 = torch.full((8,), 1e-17, dtype=torch.float64)
    ref = (r64 + torch.randn(8, dtype=torch.float64) * 1e-9).float()
    ours = (r64 + torch.randn(8, dtype=torch.float64) * 3e-9).float()
    assert compare(ours, ref, TolerancePolicy(), ref64=r64).ok
    assert not compare(ours * 1e3, ref, TolerancePolicy(), ref64=r64).ok


def test_degenerate_detection():
    assert is_degenerate(torch.full((1000,), 6e-5), 1e-4, 1e-4)
    assert not is_degenerate(torch.randn(1000), 1e-4, 1e-4)
    res = compare(torch.zeros(1000), torch.rand(1000) * 1e-4, TolerancePolicy())
    assert not res.ok and res.degenerate


def test_integers_are_exact_and_inf_signs_matter():
    assert not compare(torch.tensor([1, 2]), torch.tensor([1, 3]), TolerancePolicy()).ok
    assert not compare(torch.tensor([math.inf]), torch.tensor([-math.inf]), TolerancePolicy()).ok
    assert compare(torch.tensor([math.inf, 1.0]), torch.tensor([math.inf, 1.0]), TolerancePolicy()).ok


def test_guard_lists_compute_but_not_allocation():
    g = AtenGuard()
    x = torch.randn(4)
    with g:
        torch.empty_like(x)
        x.view(2, 2)
        x.view(2, 2).transpose_(0, 1).t_().unsqueeze_(0).squeeze_(0)  # in-place views: metadata only
        torch.mul(x, 2)
    assert g.compute_ops() == ["aten.mul.Tensor"]
    assert undeclared(["aten.mul.Tensor", "aten.convolution.default"], ["aten.convolution"]) == ["aten.mul.Tensor"]


def test_guard_poisons_every_uninitialised_allocation_whatever_the_allocator_hands_out():
    big = 16 << 20  # past glibc's mmap threshold: a freed block is unmapped, a new one reads zeros
    with AtenGuard(poison=math.nan) as g:
        a = torch.empty(big // 4)
        b = torch.empty_like(torch.ones(3, dtype=torch.int32))
        c = torch.ones(2).new_empty((5,), dtype=torch.bool)
        d = torch.empty(4, dtype=torch.float16)
    assert bool(a.isnan().all()) and b.tolist() == [2**31 - 1] * 3 and all(c.tolist()) and bool(d.isnan().all())
    assert g.compute_ops() == []  # the fill is the guard's, not the candidate's compute
    with AtenGuard(poison=-7.7e30):
        e, f = torch.empty(big // 4), torch.empty(3, dtype=torch.float16)
    assert float(e[0]) == pytest.approx(-7.7e30) and f.tolist() == [-65504.0] * 3  # clamped where the dtype overflows


def test_side_stream_rule():
    """Judged by how long the device stays busy after the timed stream's end, not by the host clock: a
    genuine CUDA-C row-split module on a loaded host measured 1.21 ms on the host, 0.485 ms in events."""
    mk = lambda dev, host, tail: Timing(dev, dev, dev, 0.0, 100, host, "cuda", tail)  # noqa: E731
    assert side_stream_suspected(mk(10e-6, 5e-3, 4.9e-3))
    assert not side_stream_suspected(mk(1e-3, 1.05e-3, 5e-6))
    assert not side_stream_suspected(mk(0.485e-3, 1.21e-3, 8e-6))  # a slow host, nothing left running


def test_cpu_timer_reports_medians():
    x = [torch.randn(256, 256) for _ in range(3)]
    t = time_callable(lambda a: a @ a, [[a] for a in x], torch.device("cpu"), trials=7)
    assert t.trials == 7 and 0 < t.min_s <= t.median_s and t.device == "cpu"


STEADY_HEAP_PROBE = """
import ctypes, torch
from akg_agent.verifier.timing import time_callable
class Info(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in "arena ordblks smblks hblks hblkhd usm fsm uord ford keep".split()]
libc = ctypes.CDLL("libc.so.6")
libc.mallinfo2.restype = Info
def mapped_by(n):  # bytes glibc maps for a fresh allocation of n floats
    before = libc.mallinfo2().hblkhd
    x = torch.empty(n)
    return libc.mallinfo2().hblkhd - before
print(mapped_by(16 << 20) > 0)
time_callable(lambda: torch.ones(4), [[]], torch.device("cpu"), trials=1, warmup=0)
print(mapped_by(16 << 20) > 0)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc")
def test_cpu_timing_reuses_a_warm_heap_for_large_outputs():
    """A 64 MiB output is mapped fresh (a page fault per page) by glibc's default policy; once the
    CPU timer has run, the process serves it from the heap, for every contender alike."""
    out = subprocess.run([sys.executable, "-c", STEADY_HEAP_PROBE], capture_output=True, text=True, cwd=ROOT,
                         timeout=120)
    assert out.stdout.split() == ["True", "False"], out.stderr[-2000:]


def test_contenders_are_timed_in_turns_so_a_drifting_host_moves_them_alike(monkeypatch):
    """The host slows to a third of its pace half way through the run (a virtual clock: each call costs
    2 ms, then 6 ms). Timed in turns, two identical contenders get the same median; timed one block
    after another, the second would look 3x slower. A contender that raises is reported as such and
    the others are still timed."""

    from akg_agent.verifier import timing
    from akg_agent.verifier.timing import paired_quartiles, time_interleaved

    calls: list[str] = []
    clock = [0.0]
    monkeypatch.setattr(timing, "_clock", lambda: clock[0])

    def work(name: str):
        def fn() -> None:
            calls.append(name)
            clock[0] += 0.002 * (3 if len(calls) > 13 else 1)  # 3 warm-up calls each, then 10 trials each
        return fn

    def broken() -> None:
        raise RuntimeError("boom")

    got = time_interleaved({"a": work("a"), "b": work("b"), "c": broken}, [[]], torch.device("cpu"), trials=10)
    assert isinstance(got["c"], RuntimeError)
    assert calls[6:10] == ["a", "b", "b", "a"]  # each turn runs every contender once, in a balanced order
    assert got["a"].median_s == pytest.approx(got["b"].median_s)
    # each trial kept in turn order: paired, the tripled pace of the later turns divides out
    assert len(got["a"].trials_s) == 10 and paired_quartiles(got["a"].trials_s, got["b"].trials_s) == (
        pytest.approx(1.0), pytest.approx(1.0))
    calls.clear()
    blocks = {n: time_interleaved({n: work(n)}, [[]], torch.device("cpu"), trials=10)[n].median_s for n in "ab"}
    assert blocks["b"] == pytest.approx(3 * blocks["a"])  # what the turns prevent


# --- GPU (run on the device machine)
@pytest.mark.gpu
def test_side_stream_kernel_is_caught():
    v = verify(SCALE, CASES / "gpu_side_stream.py", target="h100", timing=True, trials=20)
    assert not v.accepted and v.code == "side_stream", v.line()


@pytest.mark.gpu
def test_same_kernel_timed_twice_agrees_within_5_percent():
    a = torch.randn(8192, 8192, device="cuda")
    sets = [[a]]
    fn = lambda x: x.mul(3.5)  # noqa: E731
    t1 = time_callable(fn, sets, torch.device("cuda"), trials=200).median_s
    t2 = time_callable(fn, sets, torch.device("cuda"), trials=200).median_s
    assert abs(t1 - t2) / t1 < 0.05, (t1, t2)


@pytest.mark.gpu
def test_genuine_triton_kernel_on_the_gpu_with_timing():
    v = verify(SCALE, CASES / "genuine_triton_scale.py", target="h100", timing=True, baselines=("eager",))
    assert v.accepted and v.details["device"] == "cuda", v.line()


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 6])
def test_turn_orders_put_every_contender_after_every_other_equally_often(n):
    from akg_agent.verifier.timing import balanced_orders

    rows = balanced_orders(n)
    assert all(sorted(r) == list(range(n)) for r in rows)
    assert all(sorted(r[k] for r in rows) == sorted(list(range(n)) * (len(rows) // n)) for k in range(n))
    follows = [(r[k], r[k + 1]) for r in rows for k in range(n - 1)]
    assert len(set(follows)) == n * (n - 1) and len(follows) == len(set(follows)) * (len(rows) // n)


def test_a_contender_that_slows_the_next_one_slows_each_of_the_others_alike(monkeypatch):
    """A pure module whose OpenMP threads still spin after it returns slows the call after it by half: a
    rotated fixed order put the candidate there in four turns of five; balanced orders put each of the
    others there equally often, so two identical calls time alike."""

    from akg_agent.verifier import timing
    from akg_agent.verifier.timing import time_interleaved

    clock, last = [0.0], [""]
    monkeypatch.setattr(timing, "_clock", lambda: clock[0])

    def work(name: str, cost: float):
        def fn() -> None:
            clock[0] += cost * (1.5 if last[0] == "pure" else 1.0)
            last[0] = name
        return fn

    fns = {"cand": work("cand", 1.0), "eager": work("eager", 1.0), "compile": work("compile", 1.0),
           "again": work("again", 1.0), "pure": work("pure", 3.0)}
    got = time_interleaved(fns, [[]], torch.device("cpu"), trials=20)
    # within each turn every pair is balanced; a turn's last contender before the next turn's first is
    # not, one slowed call in 20 either way (the rotation: the candidate slowed in 16 of 20, 1.27x eager)
    means = [got[n].mean_s for n in ("cand", "eager", "compile", "again")]
    assert max(means) < 1.06 * min(means), means


def test_faster_than_speed_of_light_is_flagged():
    from akg_agent.verifier.sandbox import run_job

    # a speed-of-light of 10 s: any real run of this candidate beats it, which can only mean skipped work
    job = {"ref": str(SCALE), "cand": str(CASES / "genuine_cpp_scale.py"), "device": "cpu", "seeds": [0, 1],
           "train": False, "tolerances": {}, "sol_s": 10.0, "timing": {"trials": 3, "baselines": []}}
    res = run_job(job, Limits(timeout_s=60))
    assert res["code"] == "faster_than_sol" and "beats the speed-of-light" in res["reason"]


@pytest.mark.parametrize("other_s", [0.0, 10.0], ids=["memory-bound", "compute-bound"])
def test_a_run_beating_a_bound_from_a_slow_calibration_is_bounded_again_at_the_present_bandwidth(other_s):
    """A VM's bandwidth varies with its neighbours': a calibration taken while they were busy stored a
    bandwidth a correct layer norm with streaming stores then beat, rejected as skipped work. A run that
    beats the bound has its memory part bounded again at the bandwidth the host shows now (here the
    bound's bandwidth is 1 kB/s, so any present one is faster): accepted, the new bound reported; a bound
    whose compute part alone is beaten still rejects."""
    from akg_agent.verifier.sandbox import run_job

    job = {"ref": str(SCALE), "cand": str(CASES / "genuine_cpp_scale.py"), "device": "cpu", "seeds": [0, 1],
           "train": False, "tolerances": {}, "sol_s": 10.0,
           "sol_memory": {"dram_s": 10.0, "other_s": other_s, "bw": 1e3},
           "timing": {"trials": 3, "baselines": []}}
    res = run_job(job, Limits(timeout_s=60))
    if other_s:
        assert res["code"] == "faster_than_sol", res
        return
    assert res["status"] == "accepted", res
    now = res["details"]["sol_s_now"]
    assert all(isinstance(t, dict) for t in res["details"]["timing"].values())  # each a contender's
    assert 0 < now < res["details"]["timing"]["candidate"]["median_s"]  # 10 s x 1 kB/s over some GB/s


def test_verify_reports_the_bound_a_run_was_held_to(tmp_path, monkeypatch):
    """Through verify: a host profile whose bandwidth is far too low (a slow moment's calibration), a
    genuine memory-bound candidate accepted, its fraction of speed-of-light from the bound at the present
    bandwidth."""
    import json

    from hardware_models.spec import calibrated_path

    monkeypatch.setenv("AKG_CACHE_DIR", str(tmp_path))
    cal = calibrated_path("cpu")
    cal.parent.mkdir(parents=True)
    cal.write_text(json.dumps({"device": "test", "date": "today", "figures": {"memory.dram_bw": 1e3}}))
    v = verify(SCALE, CASES / "genuine_cpp_scale.py", target="cpu", timing=True, trials=3)
    assert v.accepted, v.line()
    assert v.details["sol_s"] == v.details["sol_s_now"] < v.details["timing"]["candidate"]["median_s"]


def test_the_calibrated_bandwidth_is_a_copys_or_a_reads_the_faster():
    from hardware_models.calibrate import cpu_bandwidth_now, memory_bandwidth

    def timer(read_s: float):  # a copy moves 2 x 4 kB in 1 s; a read (the sum) 4 kB in read_s
        return lambda fn, trials: read_s if getattr(fn, "__name__", "") == "sum" else 1.0

    assert memory_bandwidth("cpu", 1024, timer(0.25), 1) == 16384  # the read the faster
    assert memory_bandwidth("cpu", 1024, timer(1.0), 1) == 8192  # the copy the faster
    bw = cpu_bandwidth_now(trials=2)
    assert 1e9 < bw < 2e12  # bytes a second: above a disk's, below any memory system's


def test_no_speed_of_light_check_from_an_estimated_bandwidth(tmp_path, monkeypatch):
    """An uncalibrated host CPU's bandwidth is a guess: a batch-1 linear whose weights stay in the last
    level cache ran under that guess's bound and was rejected as mis-timed; no bound is used then."""
    from akg_agent.verifier import sol_trusted
    from hardware_models.spec import load_target

    monkeypatch.setenv("AKG_CACHE_DIR", str(tmp_path))  # no calibration file
    assert load_target("cpu").figures["memory"]["dram_bw"].source == "estimate"
    assert not sol_trusted("cpu") and sol_trusted("h100")  # a guess versus datasheet figures


def test_speed_of_light_bound_follows_the_algebraic_rewrites():
    from akg_agent.verifier import sol_bound
    from hardware_models.cost import speed_of_light
    from hardware_models.spec import load_target
    from ir.lift import lift
    from ir.problem import load_problem

    problem = load_problem(ROOT / "benchmarks" / "problems" / "gemm_rowsum.py")
    written = speed_of_light(lift(problem), load_target("h100")).sol_s
    # linear then a row sum is a GEMV after simplification: memory-bound, far below the GEMM's bound
    assert sol_bound(problem, "h100") < written / 10


@pytest.fixture
def small_chunks(monkeypatch):
    monkeypatch.setattr(candidate, "CHUNK", 1000)  # the chunked paths at a test's size
    return 1000


def test_fingerprints_see_any_one_element_change(small_chunks):
    CHUNK = small_chunks
    x = torch.randn(3 * CHUNK + 17)
    fp = _fingerprint(x)
    assert _fingerprint(x.clone()) == fp
    for i in (0, CHUNK + 5, x.numel() - 1):
        y = x.clone()
        y[i] += 1e-3
        assert _fingerprint(y) != fp
    z = x.clone()
    z[7] = math.nan
    assert _fingerprint(z) != fp and _fingerprint(z.clone()) == _fingerprint(z)
    w = x.clone()
    w[[3, 4]] = w[[4, 3]]  # the same values elsewhere
    assert _fingerprint(w) != fp


def test_large_outputs_are_compared_in_chunks_with_the_same_verdict(small_chunks):
    CHUNK = small_chunks
    ref = torch.randn(2 * CHUNK + 100)
    ref64 = ref.double()
    good = ref.clone()
    assert _compare(good, ref, TolerancePolicy(), ref64).ok
    bad = ref.clone()
    bad[-3] += 0.5  # in the last chunk
    bad[5] -= 0.25  # and in the first
    res = _compare(bad, ref, TolerancePolicy(), ref64)
    assert not res.ok and res.reason.startswith(f"2 of {ref.numel()}")
    whole = compare(bad, ref, TolerancePolicy(), ref64, chunk=ref.numel())  # one chunk: the same verdict
    assert (res.reason, res.max_abs_err) == (whole.reason, whole.max_abs_err)
    # a degenerate output (a softmax over many columns, say) is judged by its norms across chunks
    tiny = torch.rand(2 * CHUNK + 100) * 1e-6
    noisy = tiny * (1 + 1e-3 * torch.randn_like(tiny))
    for cand in (tiny.clone(), noisy):
        chunked, one = _compare(cand, tiny, TolerancePolicy(), tiny.double()), \
            compare(cand, tiny, TolerancePolicy(), tiny.double(), chunk=tiny.numel())
        assert chunked.degenerate and (chunked.ok, chunked.reason) == (one.ok, one.reason)
        assert chunked.ok == (cand is not noisy)


def test_the_verifier_reports_its_peak_against_the_footprint():
    v = verify(SCALE, CASES / "genuine_cpp_scale.py", seeds=(0, 1))
    d = v.details
    assert v.accepted and d["footprint_bytes"] == 2 * 64 * 64 * 4  # A and A * 3.5
    assert d["peak_bytes"] >= 0 and d["peak_over_footprint"] is not None


def test_a_chunk_is_judged_by_the_whole_outputs_rule(small_chunks):
    """A chunk of zeros inside an output that is not degenerate: errors within atol pass there, as they
    would if the output were compared whole (judged alone, the chunk would be held to a relative rule)."""
    CHUNK = small_chunks
    ref = torch.randn(3 * CHUNK)
    ref[CHUNK:2 * CHUNK] = 0.0
    cand = ref.clone()
    cand[CHUNK:2 * CHUNK] = 5e-5
    assert compare(cand, ref, TolerancePolicy(), ref.double()).ok  # whole
    assert _compare(cand, ref, TolerancePolicy(), ref.double()).ok  # in chunks, the same verdict


def test_the_speed_of_light_is_the_timing_cards(monkeypatch):
    """An H200 lent for an H100 target timed memory-bound modules under the H100's bound (HBM3e is 1.4x
    faster) and rejected them as mis-timed: the bound follows the card that times."""
    import akg_agent.verifier as vf
    from ir.problem import load_problem

    names = {"0": "NVIDIA H200", "1": "NVIDIA H100 80GB HBM3", "2": "Tesla T4"}
    monkeypatch.setattr(vf, "_gpu_name", lambda visible: names.get(visible.split(",")[0] or "0"))
    for visible, want in (("0", "h200"), ("1", None), ("2", "Tesla T4"), ("", "h200")):
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
        assert vf.timed_on("h100", "cuda") == want, visible
    assert vf.timed_on("h100", "cpu") is None  # the CPU runs a GPU target's module: no bound at all
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    assert vf.timed_on("h200", "cuda") == "h100"
    p = load_problem(problem_path("softmax_logsoftmax"))
    assert vf.sol_bound(p, "h200") < vf.sol_bound(p, "h100")


def test_the_timing_phase_says_how_long_it_waited_for_the_lock(tmp_path):
    v = verify(SCALE, CASES / "genuine_cpp_scale.py", seeds=(0,), timing=True, baselines=("eager",), trials=3,
               timing_lock=str(tmp_path / "lock"))
    phases = v.details["phase_s"]
    assert v.accepted and 0 <= phases["timing_lock_wait"] <= phases["timing"]


def _direct_bad_count(cand: torch.Tensor, ref: torch.Tensor, r64: torch.Tensor, atol: float, rtol: float) -> int:
    """The tolerance rule written out over the whole output: a value is off when its error against float64
    exceeds atol + rtol * |ref64| plus the reference's own largest error (finite places only)."""
    fin = torch.isfinite(ref)
    c, w = cand[fin].double(), r64[fin].double()
    own = float((ref[fin].double() - w).abs().max()) if fin.any() else 0.0
    return int(((c - w).abs() > atol + rtol * w.abs() + own).sum())


@pytest.mark.parametrize("seed", range(6))
def test_the_one_sweep_comparison_counts_what_the_rule_says(seed):
    """compare() sweeps once and counts exactly only near the floor: over random outputs with a few values
    pushed past the tolerance (some exactly to it), Infs and NaNs in the reference, its verdict and count
    are the rule's, chunked or whole."""
    g = torch.Generator().manual_seed(seed)
    n = 5000
    r64 = torch.randn(n, generator=g, dtype=torch.float64) * 10
    ref = r64.float()
    cand = ref.clone()
    atol, rtol = TolerancePolicy().for_dtype(torch.float32)
    idx = torch.randint(0, n, (seed,), generator=g)
    cand[idx] += (atol + rtol * ref[idx].abs()) * (3.0 if seed % 2 else 1.0)
    if seed >= 4:  # non-finite places, where the candidate agrees
        ref[:3] = torch.tensor([math.inf, -math.inf, math.nan])
        cand[:3] = ref[:3]
    want = _direct_bad_count(cand, ref, r64, atol, rtol)
    assert want >= 1 or seed % 2 == 0  # values pushed three tolerances out are counted
    for chunk in (n, 700):
        res = compare(cand, ref, TolerancePolicy(), r64, chunk=chunk)
        assert res.ok == (want == 0), (res.reason, want)
        if want:
            assert res.reason.startswith(f"{want} of {n}"), res.reason


def test_a_crash_is_named_by_the_runtimes_message_not_by_the_stack_dump_after_it():
    from akg_agent.verifier.sandbox import _crash_line

    log = ("RuntimeWarning: os.fork() was called. os.fork() is incompatible with multithreaded code\n"
           "E1130 21:51:40 cuda_dnn.cc:456] Invalid handle. Cannot load symbol cudnnGetVersion\n"
           "*** Check failure stack trace: ***\n"
           "    @     0x7f3e2a1b2c3d  absl::log_internal::LogMessageFatal::~LogMessageFatal()\n"
           "    @           0x5d710f  _PyEval_EvalFrameDefault\n")
    assert _crash_line(log).endswith("Invalid handle. Cannot load symbol cudnnGetVersion")
    assert _crash_line("just this\n\n") == "just this" and _crash_line("") == ""


def _scripted_runs(monkeypatch, results: list[dict]) -> list[dict]:
    """The verifier's jobs answered by `results` in turn (their plausibility as given); the jobs it ran."""
    import akg_agent.verifier as verifier

    jobs: list[dict] = []

    def fake_run_job(job, limits):
        jobs.append(job)
        return results[len(jobs) - 1]

    monkeypatch.setattr(verifier, "run_job", fake_run_job)
    monkeypatch.setattr(verifier, "_plausible", lambda res, *rest: res)
    return jobs


@pytest.mark.parametrize("first,runs,accepted,timing,held", [
    ("timeout", 2, True, True, False), ("clock", 2, True, True, False), ("implausible", 2, True, True, True),
    ("implausible", 2, False, True, False), ("mismatch", 1, False, True, False), ("timeout", 1, False, False, False)])
def test_a_timed_run_rejected_as_a_loaded_host_rejects_runs_once_more(monkeypatch, first, runs, accepted, timing,
                                                                       held):
    """A timeout, a re-timing outside noise or the parent's clock read late: what a loaded 2-core host gives
    an honest module (CI once lost a tune's strategy so). A timed run so rejected runs once more and the second
    verdict stands, but an implausible speedup only where the second run is past the bound too and held when
    timed again (`held`): a module fast only in the first process it runs in is slow, and would pass, in a
    second run (test_redteam.py). A wrong answer or an untimed run's timeout (a hung kernel) is not rerun."""

    again = {"plausibility": {"why": "past the bound", "retimed": {}}} if held else {}
    results = [{"status": "rejected", "code": first, "reason": "rejected once", "details": {}},
               {"status": "accepted", "code": "ok", "reason": "matched", "details": again}]
    jobs = _scripted_runs(monkeypatch, results)
    v = verify(SCALE, CASES / "genuine_cpp_scale.py", timing=timing, sol_check=False)
    assert len(jobs) == runs and v.accepted == accepted and jobs[0] == jobs[-1]
    assert v.code == ("ok" if accepted else first)
    assert ("first_verdict" in v.details) == (runs == 2 and accepted)


@pytest.mark.parametrize("second_ms,accepted", [(0.61, True), (3.0, False)])
def test_an_implausible_first_run_slowed_in_its_baseline_gives_way_to_the_second(monkeypatch, second_ms, accepted):
    """CI's loaded host once timed eager at 28 ms (0.8 usually) beside an honest 0.46 ms candidate: 61x, past
    the bound, and the fresh re-timing was slowed too. The second run (1.3x, under the bound) stands where its
    candidate ran as fast as the first's within noise; where the candidate is slower beyond noise, it was fast
    only in the first run and the rejection stands."""

    def timing(cand_ms, eager_ms):
        return {"timing": {"candidate": {"median_s": cand_ms / 1e3}, "eager": {"median_s": eager_ms / 1e3}}}

    results = [{"status": "rejected", "code": "implausible", "reason": "61x eager", "details": timing(0.46, 28.1)},
               {"status": "accepted", "code": "ok", "reason": "matched", "details": timing(second_ms, 0.8)}]
    jobs = _scripted_runs(monkeypatch, results)
    v = verify(SCALE, CASES / "genuine_cpp_scale.py", timing=True, sol_check=False)
    assert len(jobs) == 2 and v.accepted == accepted, v.line()
    assert v.code == ("ok" if accepted else "implausible")


def test_a_jobs_memory_cap_follows_the_problems_footprint(tmp_path, monkeypatch):
    """A model of a gigabyte of weights is estimated without allocating it (fake tensors), and its job's
    address-space cap grows by twice the estimate beyond the base, within the host's memory: a fixed 8 GiB
    holds three copies of the weights and their float64 reference only up to about 2 GB of weights."""
    import time

    from akg_agent.verifier import sandbox
    from akg_agent.verifier.memory import verification_bytes

    big = tmp_path / "big.py"
    big.write_text("import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n"
                   "    def __init__(self):\n        super().__init__()\n        self.l = nn.Linear(16384, 16384)\n\n"
                   "    def forward(self, x):\n        return self.l(x)\n\n\n"
                   "def get_inputs():\n    return [torch.randn(2, 16384)]\n\n\ndef get_init_inputs():\n    return []\n")
    t0 = time.perf_counter()
    need = verification_bytes(big)
    weights = (16384 * 16384 + 16384) * 4
    assert 3 * weights <= need < 3 * weights + 2**22 and time.perf_counter() - t0 < 10  # + ten trials of I/O
    assert sandbox.memory_for(0) == sandbox.BASE_MEMORY
    monkeypatch.setattr(sandbox, "host_memory", lambda: 64 * 2**30)
    assert sandbox.memory_for(need) == sandbox.BASE_MEMORY + 2 * need
    monkeypatch.setattr(sandbox, "host_memory", lambda: 12 * 2**30)  # within the host's memory
    assert sandbox.memory_for(need) == 12 * 2**30
    # verify hands the job that cap
    import akg_agent.verifier as vf

    seen = {}

    def fake_timed(job, limits, sol_s):
        seen["cap"] = limits.memory_bytes
        return {"status": "accepted", "code": "ok", "reason": "", "details": {}}

    monkeypatch.setattr(vf, "_timed", fake_timed)
    vf.verify(big, big, seeds=(0,))
    assert seen["cap"] == sandbox.memory_for(need) == 12 * 2**30


STATE_OUTPUT_REF = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("z", torch.zeros(64, 64))

    def forward(self, A):
        return A * 3.5, self.z


def get_inputs():
    return [torch.randn(64, 64)]


def get_init_inputs():
    return []
'''


def test_a_reference_returning_its_own_buffer_keeps_it(tmp_path):
    """The verifier fills the reference's outputs with NaN after each trial (a candidate reading freed memory
    reads NaN); an output that is the reference's own buffer (a dynamo graph returning a constant it holds:
    Mixtral's router, its zeros) was filled too, so the next seed's reference answered NaN and a correct
    candidate was rejected as replaying an earlier answer."""
    ref = tmp_path / "state_output.py"
    ref.write_text(STATE_OUTPUT_REF)
    cand = tmp_path / "state_output_new.py"
    src = (CASES / "genuine_cpp_scale.py").read_text()
    buffer = '        self.register_buffer("z", torch.zeros(64, 64))\n'
    src = src.replace("        self.s = 3.5\n", "        self.s = 3.5\n" + buffer)
    cand.write_text(src.replace("        return out\n", "        return out, self.z\n"))
    v = verify(ref, cand)
    assert v.accepted, v.line()
