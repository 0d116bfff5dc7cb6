"""Split-precision (3xTF32) GEMMs: in Triton's space only for fp32 operands on NVIDIA chips with TF32
tensor cores, priced by the cost model at three TF32 products, tried beside plain fp32 by a tuning
budget, declared in the header with the error against float64, and dropped when it does not verify."""

from __future__ import annotations

import pytest

import akg_agent.translate as tr
from akg_agent.ranking import estimated, ranked_space
from akg_agent.verifier import Verdict
from dsl_backends import get_backend
from hardware_models.cost import Tiling, estimate_group
from hardware_models.spec import load_target

from .conftest import ROOT

GEMM_FP32 = ROOT / "benchmarks" / "problems" / "gemm_fp32.py"
GEMM_BF16 = ROOT / "benchmarks" / "problems" / "gemm_bf16.py"


def _gemm(path, target="h100"):
    t = tr.build(path, "triton", target, tuned=False)  # the generated GEMM, whatever the strategy
    (k,) = [k for k in t.program.kernels() if k.kind == "matmul"]
    grp = {g.id: g for g in t.plan.groups}[k.group]
    return t, k, grp


@pytest.mark.parametrize(("path", "target", "expected"), [(GEMM_FP32, "h100", True), (GEMM_FP32, "a100", True),
                                                          (GEMM_BF16, "h100", False), (GEMM_FP32, "mi300x", False)])
def test_split_precision_is_offered_for_fp32_on_nvidia_tensor_cores_only(path, target, expected):
    t, k, _ = _gemm(path, target)
    space = get_backend("triton").tuning_space(k, load_target(target))
    assert any(s.get("input_precision") == "tf32x3" for s in space) == expected


@pytest.mark.parametrize(("target", "hopper"), [("h200", True), ("h100", True), ("a100", False)])
def test_hopper_split_tiles_of_eight_warps_take_two_warpgroups_of_rows(target, hopper):
    """A warpgroup issues 64-row MMAs on Hopper: 3xTF32 at 64 rows and 8 warps ran 1.6-2x slower on the H200
    than 128 rows or 4 warps; the Ampere MMA has no such unit, and bf16 (measured) keeps the tile."""
    t, k, _ = _gemm(GEMM_FP32, target)
    space = get_backend("triton").tuning_space(k, load_target(target))
    split = [s for s in space if s.get("input_precision") == "tf32x3"]
    short = [s for s in split if s["num_warps"] == 8 and s["BM"] < 128]
    assert split and bool(short) != hopper
    assert any(s["num_warps"] == 4 and s["BM"] == 64 for s in split)  # one warpgroup, 64 rows: kept
    assert any(s["num_warps"] == 8 and s["BM"] == 64 for s in space if "input_precision" not in s)
    t, k, _ = _gemm(GEMM_BF16, target)
    space = get_backend("triton").tuning_space(k, load_target(target))
    assert any(s["num_warps"] == 8 and s["BM"] == 64 for s in space)


def test_the_cost_model_prices_three_tf32_products():
    t, _, grp = _gemm(GEMM_FP32)
    fp32 = estimate_group(grp, t.target, Tiling(block=(128, 128, 64)))
    split = estimate_group(grp, t.target, Tiling(block=(128, 128, 64), precision="tf32x3"))
    flops = 2 * 4096**3
    assert split.flops["tensor.tf32"] == pytest.approx(3 * flops)
    assert "tensor.tf32" not in fp32.flops
    assert split.time_s < fp32.time_s  # H100: 3 x 2 x 4096^3 / 494 TFLOP/s < 2 x 4096^3 / 67


def test_a_tuning_budget_measures_both_numerics():
    t, k, grp = _gemm(GEMM_FP32)
    ranked = ranked_space(get_backend("triton"), k, grp, t.target)
    first = [s.get("input_precision", "ieee") for s in ranked[:4]]
    assert first == ["tf32x3", "ieee", "tf32x3", "ieee"]


def _force_split(monkeypatch):
    real = tr.choose_schedule

    def split(backend, k, grp, target):
        s = real(backend, k, grp, target)
        return s.replace(input_precision="tf32x3") if k.kind == "matmul" else s
    monkeypatch.setattr(tr, "choose_schedule", split)


def test_a_verified_split_precision_module_says_so_with_its_error(monkeypatch):
    _force_split(monkeypatch)
    t = tr.translate(ROOT / "tests" / "problems" / "mm_batched.py", "triton", "h100", timing=False, seeds=(0,))
    head = t.source.split("\nimport", 1)[0]
    assert 'input_precision="tf32x3"' in t.source
    assert "fp32 contractions as tf32x3" in head and "allowed because the verifier" in head
    assert "max error vs float64:" in head and "torch's own:" in head


def test_split_precision_that_fails_verification_falls_back_to_fp32(monkeypatch):
    _force_split(monkeypatch)
    real = tr._verify
    seen: list[bool] = []

    def verify(t, *args):
        split = any(s.get("input_precision") == "tf32x3" for s in t.schedules.values())
        seen.append(split)
        if split:  # what a chip whose TF32 path loses accuracy would give
            return Verdict(False, "wrong", "output 0 wrong: 12 of 4096 values off by up to 0.003")
        return real(t, *args)
    monkeypatch.setattr(tr, "_verify", verify)
    t = tr.translate(ROOT / "tests" / "problems" / "mm_batched.py", "triton", "h100", timing=False, seeds=(0,))
    assert seen == [True, False] and t.verdict.accepted
    assert "tf32x3" not in t.source and "fp32 kept in fp32" in t.source
    assert any("split-precision GEMMs failed verification" in n for n in t.notes)


def test_pallas_asks_the_gpu_for_the_contraction_precision_its_schedule_names():
    """precision=None is plain TF32 on the GPU (a 4096-long fp32 GEMM off by 0.1): every fp32 dot names
    its algorithm, and the interpreter (XLA's CPU takes no TF32 algorithm) computes fp32 exactly. The plan as
    asked (tuned=False): untuned, the cost model leaves a GEMM this size to cuBLAS."""
    import jax

    t = tr.build(GEMM_FP32, "pallas", "h100", tuned=False)
    split = {n for n, s in t.schedules.items() if s.get("input_precision") == "tf32x3"}
    assert split, t.schedules
    src = tr.render(t)
    assert "_akg_dot_precision('tf32x3')" in src and "precision=None" not in src
    t = tr.build(GEMM_FP32, "pallas", "h100", tuned=False)
    t.schedules = {n: s.replace(input_precision="ieee") for n, s in t.schedules.items()}
    assert "_akg_dot_precision('ieee')" in tr.render(t)
    ns: dict = {}
    exec(compile(src, "m.py", "exec"), ns)  # noqa: S102 - the module written above, run for its helpers
    presets = jax.lax.DotAlgorithmPreset
    ns["_AKG_INTERPRET"][0] = False
    assert [ns["_akg_dot_precision"](p) for p in ("tf32x3", "ieee", "tf32")] == \
        [presets.TF32_TF32_F32_X3, presets.F32_F32_F32, presets.TF32_TF32_F32]
    ns["_AKG_INTERPRET"][0] = True
    assert ns["_akg_dot_precision"]("tf32x3") == jax.lax.Precision.HIGHEST


def test_tensor_core_tiles_the_model_cannot_tell_apart_rank_the_larger_first():
    """4096^3 in 3xTF32: every tile is estimated tensor-bound at the same time; the larger tile with
    the deeper K step comes first. An FMA tile and a tensor-core one compare by their estimates."""
    t, k, grp = _gemm(GEMM_FP32)
    ranked = ranked_space(get_backend("triton"), k, grp, t.target)
    split = [s for s in ranked if s.get("input_precision") == "tf32x3"]
    assert (split[0]["BM"], split[0]["BN"], split[0]["BK"]) == (128, 128, 64)
    tiles = [(s["BM"], s["BN"]) for s in split]
    assert tiles.index((128, 128)) < tiles.index((128, 64)) < tiles.index((64, 64))
    est = {str(s): e.time_s for e, s in estimated(grp, t.target, ranked, get_backend("triton"))}
    fma = [s for s in ranked if s.get("input_precision") != "tf32x3"]
    assert est[str(split[0])] < est[str(fma[0])] and ranked[0] == split[0]
