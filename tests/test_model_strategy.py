"""The cost model's strategy where nothing is measured yet: an untuned translate leaves a program's GEMMs
to the library where the target states its library GEMM's efficiency, the backend its own, and the
estimate favours the library (a compute-bound fp32 GEMM on the CPU); a skinny GEMM (weights streamed
either way) and a bf16 GEMM on a CPU without BF16 instructions stay generated; a tune's measurement
overrides the model."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from types import SimpleNamespace

import pytest

from akg_agent.agents.designer import rules_plan
from akg_agent.strategy import Strategy, model_gemm_library
from akg_agent.translate import build, translate
from akg_agent.tuning_db import TuningDB, hardware_key, problem_signature, versions
from dsl_backends import get_backend
from hardware_models.cost import gemm_library_choice
from hardware_models.spec import Figure, load_target

LINEAR = """import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear({k}, {n}).to(torch.{dtype})

    def forward(self, x):
        return torch.relu(self.fc(x)) * 0.5


def get_inputs():
    return [torch.randn({m}, {k}, dtype=torch.{dtype})]


def get_init_inputs():
    return []
"""


def _problem(tmp_path: Path, m: int, k: int = 512, n: int = 512, dtype: str = "float32") -> Path:
    p = tmp_path / f"linear_{m}x{k}x{n}_{dtype}.py"
    p.write_text(LINEAR.format(m=m, k=k, n=n, dtype=dtype))
    return p


def _gemm_choice(path: Path, target=None):
    t = build(path, "cpp", "cpu", tuned=False)
    target = target or t.target
    [grp] = [g for g in t.plan.groups if g.anchor is not None and g.anchor.op == "linear"]
    return gemm_library_choice(grp, target, get_backend("cpp").manifest.gemm_efficiency["cpu"])


def test_the_model_prices_a_compute_bound_gemm_in_the_library_and_a_skinny_one_generated(tmp_path):
    big = _gemm_choice(_problem(tmp_path, 256))
    assert big is not None and big.library_s < big.generated_s, big
    skinny = _gemm_choice(_problem(tmp_path, 1))
    assert skinny is not None and skinny.library_s >= skinny.generated_s, skinny


def test_a_bf16_gemm_stays_generated_where_the_library_takes_a_slow_path(tmp_path):
    cpu = load_target("cpu")
    slow = dict(cpu.figures["library"], **{"gemm_bf16": Figure(0.005, "measured")})
    target = dataclasses.replace(cpu, figures=dict(cpu.figures, library=slow))
    c = _gemm_choice(_problem(tmp_path, 256, dtype="bfloat16"), target)
    assert c is not None and c.library_s > c.generated_s, c
    fast = dict(cpu.figures["library"], **{"gemm_bf16": Figure(0.8, "estimate")})
    c = _gemm_choice(_problem(tmp_path, 256, dtype="bfloat16"),
                     dataclasses.replace(cpu, figures=dict(cpu.figures, library=fast)))
    assert c is not None and c.library_s < c.generated_s, c


def test_no_figure_no_choice(tmp_path):
    """A backend that does not state its GEMM's efficiency (or a target without the library's) keeps the
    plan as asked."""
    t = build(_problem(tmp_path, 256), "cpp", "cpu", tuned=False)
    be = get_backend("cpp")
    assert model_gemm_library(t.plan, be, t.target)
    quiet = SimpleNamespace(manifest=dataclasses.replace(be.manifest, gemm_efficiency={}))
    assert model_gemm_library(t.plan, quiet, t.target) == ""
    bare = dataclasses.replace(t.target, figures={k: v for k, v in t.target.figures.items() if k != "library"})
    assert model_gemm_library(t.plan, be, bare) == ""


def test_a_generated_gemm_rate_measured_on_this_host_wins_over_the_manifests(tmp_path):
    """`akg hw calibrate` stores library.generated_gemm_<dsl>: where this host's generated GEMM is measured
    as fast as its library's, the model keeps it generated (no extra pass for the epilogue)."""
    t = build(_problem(tmp_path, 256), "cpp", "cpu", tuned=False)
    be = get_backend("cpp")
    assert model_gemm_library(t.plan, be, t.target)  # the manifest's 0.45 against the library's 0.8
    lib = t.target.fig("library", "gemm_f32").value
    for measured, to_library in ((lib, False), (0.5 * lib, True)):
        figs = dict(t.target.figures["library"], generated_gemm_cpp=Figure(measured, "calibrated"))
        host = dataclasses.replace(t.target, figures=dict(t.target.figures, library=figs))
        assert bool(model_gemm_library(t.plan, be, host)) == to_library


def test_an_untuned_translate_takes_the_models_strategy_and_verifies(tmp_path):
    big = _problem(tmp_path, 256)
    t = translate(big, "cpp", "cpu", timing=False, seeds=(0, 1))
    assert t.strategy == Strategy(library=("gemm",)) and [s.op for s in t.program.library_calls()] == ["linear"]
    assert t.verdict.accepted, t.verdict.line()
    line = next(ln for ln in t.source.splitlines() if "strategy:" in ln)
    assert "the cost model's: 1 GEMM group estimated" in line and "akg tune measures both" in line, line
    # and the plan says whose choice it was (not the user's --library)
    plan = rules_plan(t, 0.5)
    assert [g.why for g in plan.groups if g.strategy == "library"] == [
        "the gemm family left to torch (the cost model estimates it faster; akg tune measures both), prologue and "
        "epilogue generated"]
    # the relu and scale stay a generated epilogue
    assert [k.kind for k in t.program.kernels()] == ["pointwise"]
    skinny = build(_problem(tmp_path, 2), "cpp", "cpu")
    assert skinny.strategy == Strategy() and not skinny.strategy_why
    assert [k.kind for k in skinny.program.kernels()] == ["matmul"]
    # the plan exactly as asked
    assert build(big, "cpp", "cpu", tuned=False).strategy == Strategy()


def test_a_measured_strategy_overrides_the_model(tmp_path):
    big = _problem(tmp_path, 256)
    t = build(big, "cpp", "cpu", tuned=False)
    db = TuningDB()
    db.put_choice(hardware_key(t.target), "cpp", problem_signature(big), versions(get_backend("cpp").manifest),
                  Strategy().to_json(), 1e-3)
    measured = build(big, "cpp", "cpu")
    assert measured.strategy == Strategy() and measured.strategy_s == pytest.approx(1e-3)
    assert not measured.strategy_why and [k.kind for k in measured.program.kernels()][0] == "matmul"


@pytest.mark.parametrize("dsl", ["cuda-c", "tilelang", "pallas"])
def test_on_the_h100_a_compute_bound_fp32_gemm_goes_to_cublas_and_a_tiny_one_stays_generated(tmp_path, dsl):
    """The H100 states cuBLAS's efficiency ([library] in h100.toml) and these backends their own GEMM's
    (manifest gemm_efficiency.gpu): their untuned translation of a 4096^3 linear layer calls the library
    (their own ran at 0.28x eager on the H100), a launch-bound one is generated."""
    big = build(_problem(tmp_path, 4096, 4096, 4096), dsl, "h100")
    assert big.strategy == Strategy(library=("gemm",)), big.strategy
    assert "the cost model's" in big.strategy_why
    assert build(_problem(tmp_path, 2, 64, 64), dsl, "h100").strategy == Strategy()


def test_triton_states_no_gpu_gemm_efficiency_so_its_3xtf32_gemm_stays_until_a_tune_measures(tmp_path):
    # its tuned 3xTF32 GEMMs with epilogues beat cuBLAS + epilogue (1.12-1.42x), plain ones lose: one
    # figure would mislead either way
    assert "gpu" not in get_backend("triton").manifest.gemm_efficiency
    assert build(_problem(tmp_path, 4096, 4096, 4096), "triton", "h100").strategy == Strategy()


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_triton_16_bit_gemms_and_attentions_go_to_the_library_where_it_is_estimated_faster(tmp_path, dtype):
    """Triton's 16-bit GEMM template at 0.51-0.68 of the tensor-core peak on the H200 (cold L2), cuBLAS's at
    0.75 (the real-size set cast to bf16: plain GEMMs 0.77-0.95x eager, attentions 0.54-0.67x, generated):
    its manifest states the 16-bit figure (`gpu_bf16`, `gpu_f16`), so an untuned compute-bound 16-bit GEMM
    is cuBLAS's, a launch-bound one stays generated, and so is a 16-bit attention by the same estimate."""
    big = build(_problem(tmp_path, 4096, 4096, 4096, dtype), "triton", "h200")
    assert big.strategy == Strategy(library=("gemm",)) and "the cost model's" in big.strategy_why
    assert build(_problem(tmp_path, 2, 64, 64, dtype), "triton", "h200").strategy == Strategy()
    attention = tmp_path / f"attention_{dtype}.py"
    attention.write_text(ATTENTION_BLOCK.format(tail="a").replace(
        "torch.randn(2, 4, 128, 64)", f"torch.randn(16, 16, 1024, 64, dtype=torch.{dtype})"))
    t = build(attention, "triton", "h200")
    assert t.strategy == Strategy(library=("attention",)) and "flash kernels" in t.strategy_why
    assert not t.program.kernels() and len(t.program.library_calls()) == 1
    # a 2-layer model's attention (512 tokens) is launch-bound: the library's dispatch costs more
    small = attention.with_name("small.py")
    small.write_text(attention.read_text().replace("16, 16, 1024, 64", "8, 12, 512, 64"))
    assert build(small, "triton", "h200").strategy == Strategy()
    fp32 = attention.with_name("attention_fp32.py")
    fp32.write_text(ATTENTION_BLOCK.format(tail="a").replace("2, 4, 128, 64", "16, 16, 1024, 64"))
    assert build(fp32, "triton", "h200").strategy == Strategy()  # its fp32 template beats torch's


ATTENTION_BLOCK = """import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(256, 256)

    def forward(self, q, k, v):
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return {tail}


def get_inputs():
    return [torch.randn(2, 4, 128, 64) for _ in range(3)]


def get_init_inputs():
    return []
"""


@pytest.mark.parametrize("projected", [False, True])
def test_an_attention_is_not_taken_apart_for_the_librarys_gemms(tmp_path, projected):
    """An attention the default plan runs as one kernel is no pair of GEMMs to the model: alone, it stays
    generated (the C++ template); beside a GEMM the model leaves to the library, it is one library call
    (marking its GEMMs alone stored the score tensor between two library GEMMs and a softmax kernel)."""
    path = tmp_path / "att.py"
    path.write_text(ATTENTION_BLOCK.format(tail="self.proj(a.transpose(1, 2).reshape(2, 128, 256))" if projected
                                           else "a * 2.0"))
    t = translate(path, "cpp", "cpu", timing=False, seeds=(0, 1))
    assert t.verdict.accepted, t.verdict.line()
    calls = sorted(s.op for s in t.program.library_calls())
    if projected:
        assert t.strategy == Strategy(library=("gemm", "attention")) and "attention" in calls and "linear" in calls
        assert not any(k.kind == "attention" for k in t.program.kernels())
    else:
        assert t.strategy == Strategy() and [k.kind for k in t.program.kernels()] == ["attention"], calls


def test_a_backend_without_an_attention_template_leaves_the_attention_to_the_library(tmp_path):
    """CUDA-C writes no flash kernel: beside the GEMMs the model leaves to the library, an attention is the
    library's one call, not two library GEMMs around stored scores and a softmax kernel (a BERT's two
    attentions: 0.21 ms of stored scores and copies against cuDNN's 0.04 ms on the H200)."""
    path = tmp_path / "att.py"
    path.write_text(ATTENTION_BLOCK.format(tail="self.proj(a.transpose(1, 2).reshape(2, 128, 256))"))
    assert "attention" not in get_backend("cuda-c").manifest.kinds
    t = translate(path, "cuda-c", "h200", timing=False, seeds=(0,))
    calls = sorted(s.op for s in t.program.library_calls())
    assert t.strategy == Strategy(library=("gemm", "attention")) and "attention" in calls, (t.strategy, calls)
    assert not any(k.kind in ("matmul", "rownorm") for k in t.program.kernels())


def test_a_grouped_launch_order_shares_b_panels_so_a_large_16_bit_gemm_is_compute_bound(tmp_path):
    """Triton's GROUP_M runs 8 rows of tiles together, each B panel read once for them: without it in the
    model an 8192^3 bf16 GEMM was DRAM-bound at every tile, and the memory-bound tie-breaks chose 128x128x32
    over two stages, measured at half the speed of 128x256x64 over three (cuBLAS's 0.99x) on the H200."""
    from hardware_models.cost import Tiling, estimate_group

    t = build(_problem(tmp_path, 8192, 8192, 8192, "bfloat16"), "triton", "h200", tuned=False)
    [s] = [s for s in t.schedules.values() if "BK" in s]
    assert (s["BM"], s["BN"], s["BK"], s["num_stages"], s["num_warps"]) == (128, 256, 64, 3, 8)
    [grp] = [g for g in t.plan.groups if g.anchor is not None and g.anchor.op == "linear"]
    alone, grouped = (estimate_group(grp, t.target, Tiling((128, 256, 64), 8, 3, group_m=gm)) for gm in (1, 8))
    assert alone.bound == "dram" and grouped.bound.startswith("tensor"), (alone.bound, grouped.bound)


SQUARE_BF16 = """import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, a, b):
        return torch.matmul(a, b)


def get_inputs():
    return [torch.randn(1024, 2048, dtype=torch.bfloat16), torch.randn(2048, 2048, dtype=torch.bfloat16)]


def get_init_inputs():
    return []
"""


def test_a_module_replayed_as_a_cuda_graph_prices_a_library_call_as_a_launch(tmp_path):
    # torch.compile's inference graphs replay as CUDA graphs: no host dispatch per library call. A bf16
    # GEMM whose estimates differ by less than the dispatch goes to the library only then
    p = tmp_path / "square_bf16.py"
    p.write_text(SQUARE_BF16)
    plain, replayed = build(p, "triton", "h200"), build(p, "triton", "h200", graph_replay=True)
    assert plain.strategy.library == () and replayed.strategy.library == ("gemm",)
    assert "replayed as a CUDA graph" in replayed.strategy_why
    [grp] = [g for g in plain.plan.groups if g.anchor is not None]
    eff = get_backend("triton").manifest.gemm_efficiency["gpu_bf16"]
    a, b = gemm_library_choice(grp, plain.target, eff), gemm_library_choice(grp, plain.target, eff, replayed=True)
    call = plain.target.fig("library", "call_s").value
    assert a.generated_s == b.generated_s and b.library_s < a.library_s < b.library_s + call
