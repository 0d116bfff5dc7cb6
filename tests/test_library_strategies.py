"""Library strategies (`ir.passes.library`): op families left to torch with their prologues and
epilogues generated. Each torch line means what the interpreter says; each family, forced, verifies
(C++ natively, the other DSLs through their executors, CUDA-C compiled); a tune measures each family
both ways and translate takes the fastest."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from akg_agent.bench.runner import strategy_of
from akg_agent.cli import main
from akg_agent.strategy import Strategy
from akg_agent.translate import build, render, translate
from akg_agent.tune import _grow, _together, strategies_for, tune
from akg_agent.tuning_db import TuningDB
from dsl_backends.module import LIBRARY_DECLARATIONS, declared_calls, library_line
from ir.errors import AkgError
from ir.interp import EvalCtx, eval_op
from ir.kernel.ir import Buf, LibraryCall
from ir.passes.library import LIBRARY_FAMILIES, families_of
from ir.verify import verify_graph

from .conftest import ROOT, problem_path

CASES = [  # op, argument shapes (None: absent; "bool": a boolean mask), attributes
    ("permute", [(2, 3, 4)], {"dims": [2, 0, 1]}),
    ("slice", [(4, 9, 6)], {"dim": 1, "start": 2, "end": 8, "step": 3}),
    ("slice", [(3, 5)], {"dim": 1, "start": 1, "end": 4, "step": 1}),
    ("matmul", [(3, 5), (5, 4)], {}),
    ("matmul", [(2, 3, 5), (2, 5, 4)], {}),
    ("matmul", [(2, 3, 5), (5, 4)], {}),
    ("matmul", [(1, 3, 5), (2, 5, 4)], {}),
    ("reshape", [(2, 3, 4)], {"shape": [6, 2, 2]}),
    ("matmul", [(2, 5, 7), (7, 3)], {}),
    ("linear", [(4, 6), (5, 6), (5,)], {}),
    ("linear", [(2, 4, 6), (5, 6)], {}),
    ("sum", [(3, 4, 5)], {"dims": None, "keepdim": False}),
    ("mean", [(3, 4, 5)], {"dims": [-1], "keepdim": True}),
    ("amax", [(3, 4, 5)], {"dims": [0, 2], "keepdim": False}),
    ("amin", [(3, 4)], {"dims": [], "keepdim": False}),
    ("prod", [(3, 4, 5)], {"dims": [0, 2], "keepdim": False}),
    ("prod", [(3, 4)], {"dims": None, "keepdim": True}),
    ("var", [(6, 7)], {"dims": [1], "keepdim": False, "correction": 0.0}),
    ("std", [(6, 7)], {"dims": None, "keepdim": True, "correction": 1.0}),
    ("norm", [(6, 7)], {"dims": [1], "keepdim": False, "ord": 1.0}),
    ("argmax", [(6, 7)], {"dim": None, "keepdim": False}),
    ("argmin", [(6, 7)], {"dim": 1, "keepdim": True}),
    ("softmax", [(4, 9)], {"dim": -1}),
    ("log_softmax", [(4, 9, 2)], {"dim": 1}),
    ("logsumexp", [(4, 9)], {"dims": [1], "keepdim": False}),
    ("layer_norm", [(3, 4, 8), (8,), (8,)], {"normalized_shape": [8], "eps": 1e-5}),
    ("layer_norm", [(3, 4, 8), None, None], {"normalized_shape": [4, 8], "eps": 1e-3}),
    ("rms_norm", [(3, 8), (8,)], {"normalized_shape": [8], "eps": None}),
    ("group_norm", [(2, 6, 5), (6,), (6,)], {"groups": 3, "eps": 1e-5}),
    ("instance_norm", [(2, 3, 5, 5), (3,), (3,)], {"eps": 1e-5}),
    ("batch_norm", [(4, 3, 5), (3,), (3,), (3,), (3,)], {"training": False, "momentum": 0.1, "eps": 1e-5}),
    ("batch_norm", [(4, 3, 5), (3,), (3,), (3,), (3,)], {"training": True, "momentum": 0.1, "eps": 1e-5}),
    ("attention", [(2, 3, 6, 8), (2, 3, 10, 8), (2, 3, 10, 8)], {"scale": None, "causal": False}),
    ("attention", [(2, 3, 6, 8), (2, 3, 6, 8), (2, 3, 6, 8)], {"scale": 0.5, "causal": True}),
    ("attention", [(2, 6, 8), (2, 6, 8), (2, 6, 8), "bool"], {"scale": None, "causal": True}),
    ("attention", [(2, 6, 8), (2, 6, 8), (2, 6, 8), (6, 6)], {"scale": None, "causal": True}),
    ("attention", [(2, 6, 8), (2, 6, 8), (2, 6, 8), "bool-dead"], {"scale": None, "causal": False}),
]


@pytest.mark.parametrize(("op", "shapes", "attrs"), CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_each_library_line_means_what_the_interpreter_says(op, shapes, attrs):
    gen = torch.Generator().manual_seed(7)
    args: list[torch.Tensor | None] = []
    for s in shapes:
        if s is None:
            args.append(None)
        elif s in ("bool", "bool-dead"):
            args.append(torch.rand(6, 6, generator=gen) > 0.3)
            if s == "bool-dead":  # a query with every key masked: 0 in torch's attention and the IR's
                args[-1][2] = False
        else:
            args.append(torch.randn(*s, generator=gen, dtype=torch.float64).abs().add(0.1)
                        if op == "batch_norm" else torch.randn(*s, generator=gen, dtype=torch.float64))
    bufs = tuple(None if a is None else Buf(f"a{i}", tuple(a.shape), "bool" if a.dtype == torch.bool else "f64",
                                            "input") for i, a in enumerate(args))
    step = LibraryCall("lib", op, bufs, dict(attrs), Buf("out", (1,), "f64", "output"))
    line = library_line(step, lambda b: "None" if b is None else b.name)
    got = eval(line, {"torch": torch, "F": F}, {f"a{i}": a for i, a in enumerate(args)})  # noqa: S307
    want = eval_op(op, args, dict(attrs), EvalCtx())
    torch.testing.assert_close(got, want, atol=1e-9, rtol=1e-9, msg=line)


def test_a_library_matmul_is_torch_mm_or_bmm_where_the_ranks_allow():
    """torch.matmul's own dispatch (expand, reshape, then bmm) cost a small call's time: a library-only
    module read 0.73x eager's identical bmm on the CPU; mm and bmm where they mean the same, matmul else."""
    for shapes, want in [([(3, 5), (5, 4)], "torch.mm("), ([(2, 3, 5), (2, 5, 4)], "torch.bmm("),
                         ([(2, 3, 5), (5, 4)], "torch.matmul("), ([(1, 3, 5), (2, 5, 4)], "torch.matmul(")]:
        bufs = tuple(Buf(f"a{i}", s, "f32", "input") for i, s in enumerate(shapes))
        line = library_line(LibraryCall("lib", "matmul", bufs, {}, Buf("out", (1,), "f32", "output")), lambda b: b.name)
        assert line.startswith(want), (shapes, line)


FORCED = [("l2_gemm_scale_sigmoid_sum", "gemm", {"linear"}), ("attention_sdpa", "attention", {"attention"}),
          ("norm_instance_group", "norm", {"instance_norm", "group_norm"}),
          ("softmax_logsoftmax", "softmax", {"softmax", "log_softmax"}),
          ("red_var_std", "reduce", {"var", "std"}), ("pool_max_1d_2d_3d", "window", {"max_pool"}),
          ("scan_cumsum_cumprod", "scan", {"cumsum", "cumprod"})]


@pytest.mark.parametrize(("name", "family", "ops"), FORCED, ids=[f[1] for f in FORCED])
def test_each_family_forced_to_the_library_verifies(name, family, ops, tmp_path, monkeypatch):
    """C++ natively; scans through Triton's interpreter (the C++ backend calls torch for them anyway)."""
    monkeypatch.setenv("AKG_CACHE_DIR", str(tmp_path))
    dsl, target = ("triton", "h100") if family == "scan" else ("cpp", "cpu")
    plain = build(problem_path(name), dsl, target, tuned=False)
    assert family in plain.graph.meta["library_families"]
    assert not ops & {s.op for s in plain.program.library_calls()}  # generated by default
    t = translate(problem_path(name), dsl, target, tmp_path / "m.py", timing=False, seeds=(0, 1), library=(family,))
    assert t.verdict.accepted, t.verdict.line()
    assert ops <= {s.op for s in t.program.library_calls()}
    src = (tmp_path / "m.py").read_text()
    assert f"library={family}" in src and "library call torch" in src
    verify_graph(t.graph)


def test_a_library_attention_under_a_boolean_mask_verifies(tmp_path, monkeypatch):
    """torch's CPU attention turns a boolean mask into an additive one through ATen's where (declared with
    the call); padded queries, masked everywhere, answer 0 in the module as in the reference."""
    monkeypatch.setenv("AKG_CACHE_DIR", str(tmp_path))
    path = ROOT / "tests" / "fixtures" / "attention_mostly_masked.py"
    t = translate(path, "cpp", "cpu", tmp_path / "m.py", timing=False, seeds=(0, 1), library=("attention",))
    assert t.verdict.accepted, t.verdict.line()
    assert [s.op for s in t.program.library_calls()] == ["attention"]


@pytest.mark.gpu
@pytest.mark.parametrize(("name", "family", "ops"), FORCED, ids=[f[1] for f in FORCED])
def test_each_family_forced_to_the_library_verifies_on_the_gpu(name, family, ops, tmp_path, monkeypatch):
    """What torch dispatches to on the GPU (cuDNN's batch norm, the flash attention kernels) is declared."""
    monkeypatch.setenv("AKG_CACHE_DIR", str(tmp_path))
    t = translate(problem_path(name), "triton", "h100", timing=False, seeds=(0, 1), library=(family,))
    assert t.executor == "native" and t.verdict.accepted, t.verdict.line()
    assert ops <= {s.op for s in t.program.library_calls()}


@pytest.mark.gpu
def test_batch_norm_left_to_cudnn_verifies(tmp_path, monkeypatch):
    monkeypatch.setenv("AKG_CACHE_DIR", str(tmp_path))
    t = translate(problem_path("norm_batch"), "triton", "h100", timing=False, seeds=(0, 1), library=("norm",))
    assert t.verdict.accepted, t.verdict.line()


def test_a_library_gemm_keeps_its_epilogue_in_generated_kernels():
    t = build(problem_path("l2_gemm_scale_sigmoid_sum"), "cpp", "cpu", tuned=False, library=("gemm",))
    assert [s.op for s in t.program.library_calls()] == ["linear"]
    assert t.program.kernels() and all(k.kind != "matmul" for k in t.program.kernels())
    assert declared_calls(t.program) == LIBRARY_DECLARATIONS["linear"]  # what the guard lets F.linear run


SKINNY = """import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.step, self.head = nn.Linear(64, 96), nn.Linear(64, 96)

    def forward(self, h, x):
        return torch.tanh(self.step(h)), self.head(x)


def get_inputs():
    return [torch.randn(2, 64), torch.randn(32, 64)]


def get_init_inputs():
    return []
"""


def test_a_linear_of_a_few_rows_stays_generated_on_the_cpu(tmp_path, monkeypatch):
    """Under the gemm library strategy a recurrence's step (2 rows of a weight read every step) stays generated on
    the CPU, where MKL's call took ~3x a generated one's (the set's GRU model: 46 ms against torch's 76); a GEMM
    of more rows goes to the library, and on a GPU the few rows do too."""
    monkeypatch.setenv("AKG_CACHE_DIR", str(tmp_path))
    path = tmp_path / "skinny.py"
    path.write_text(SKINNY)
    t = translate(path, "cpp", "cpu", tmp_path / "m.py", timing=False, seeds=(0, 1), library=("gemm",))
    assert t.verdict.accepted, t.verdict.line()
    assert [s.out.shape for s in t.program.library_calls() if s.op == "linear"] == [(32, 96)]
    assert any(k.kind == "matmul" for k in t.program.kernels())
    gpu = build(path, "triton", "h100", tuned=False, library=("gemm",))
    assert sorted(s.out.shape for s in gpu.program.library_calls() if s.op == "linear") == [(2, 96), (32, 96)]


def test_a_transposed_operand_reaches_the_library_as_a_view(tmp_path, monkeypatch):
    monkeypatch.setenv("AKG_CACHE_DIR", str(tmp_path))
    t = translate(problem_path("mm_rect_transposed"), "cpp", "cpu", tmp_path / "m.py", timing=False, seeds=(0, 1),
                  library=("gemm",))
    assert t.verdict.accepted, t.verdict.line()
    assert not t.program.kernels() and "permute" in [s.op for s in t.program.library_calls()]  # no copy kernel
    src = (tmp_path / "m.py").read_text()
    views = [ln for ln in src.splitlines() if ".permute(" in ln]
    assert len(views) == 2 and not any("contiguous" in ln for ln in views), views


QKV = """
import torch


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = torch.nn.Linear(16, 48)

    def forward(self, x):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        return torch.softmax(q @ k.transpose(-2, -1), dim=-1) @ v


def get_inputs():
    return [torch.randn(3, 10, 16)]


def get_init_inputs():
    return []
"""


@pytest.mark.parametrize(("dsl", "target"), [("cpp", "cpu"), ("triton", "h100")])
def test_chunks_of_one_projection_reach_the_library_as_slices_not_copies(dsl, target, tmp_path, monkeypatch):
    """q, k and v cut from one projection's output are read by the library's matmuls in place (strided
    views of it), as eager does: no generated kernel copies them out first."""
    monkeypatch.setenv("AKG_CACHE_DIR", str(tmp_path))
    prob = tmp_path / "qkv.py"
    prob.write_text(QKV)
    t = translate(prob, dsl, target, tmp_path / "m.py", timing=False, seeds=(0, 1), library=("gemm", "softmax"))
    assert t.verdict.accepted, t.verdict.line()
    assert not t.program.kernels()  # the slices, the transpose, the GEMMs and the softmax: all torch
    src = (tmp_path / "m.py").read_text()
    views = [ln.strip() for ln in src.splitlines() if "[:, :, " in ln]
    assert len(views) == 3 and not any("contiguous" in ln for ln in views), views
    assert {ln.split("[:, :, ")[1] for ln in views} == {"0:16]", "16:32]", "32:48]"}

HEADS = """
import torch
import torch.nn.functional as F


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = torch.nn.Linear(32, 96)

    def forward(self, x):
        b, s, e = x.shape
        q, k, v = self.qkv(x).split(e, dim=-1)
        q, k, v = (t.reshape(b, s, 4, e // 4).transpose(1, 2) for t in (q, k, v))
        return F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, s, e)


def get_inputs():
    return [torch.randn(2, 12, 32)]


def get_init_inputs():
    return []
"""


def test_heads_split_from_one_projection_reach_the_library_attention_as_views(tmp_path, monkeypatch):
    """Split, reshaped into heads and transposed: views all the way into torch's attention (a kept
    composite, not a marked op), as eager passes them; the projection itself stays generated, and the
    attention's output, read by nothing but the return, is copied out once."""
    monkeypatch.setenv("AKG_CACHE_DIR", str(tmp_path))
    prob = tmp_path / "heads.py"
    prob.write_text(HEADS)
    t = translate(prob, "cpp", "cpu", tmp_path / "m.py", timing=False, seeds=(0, 1), library=("attention",))
    assert t.verdict.accepted, t.verdict.line()
    calls = [s.op for s in t.program.library_calls()]
    # each view a step of its own (in some topological order), all before the attention
    assert sorted(calls[:9]) == sorted(["slice", "reshape", "permute"] * 3) and calls[9] == "attention", calls
    assert [k.kind for k in t.program.kernels()][0] == "matmul"  # the projection: generated
    src = (tmp_path / "m.py").read_text()
    assert sum(".reshape([2, 12, 4, 8])" in ln and "contiguous" not in ln for ln in src.splitlines()) == 3

@pytest.mark.parametrize(("dsl", "target"), [("triton", "h100"), ("tilelang", "h100"), ("pallas", "h100"),
                                             ("pallas", "tpu-v5p"), ("metal", "m4-max")])
def test_library_gemm_and_norm_verify_through_every_executor(dsl, target, tmp_path, monkeypatch):
    monkeypatch.setenv("AKG_CACHE_DIR", str(tmp_path))
    t = translate(problem_path("l2_gemm_gelu_softmax_layernorm"), dsl, target, timing=False, seeds=(0, 1),
                  library=("gemm", "norm"))
    assert t.verdict.accepted, t.verdict.line()
    assert {s.op for s in t.program.library_calls()} == {"linear", "layer_norm"} and t.program.kernels()


def test_library_gemm_and_norm_compile_in_cuda_c(tmp_path, monkeypatch):
    monkeypatch.setenv("AKG_CACHE_DIR", str(tmp_path))
    t = translate(problem_path("l2_gemm_gelu_softmax_layernorm"), "cuda-c", "h100", timing=False,
                  library=("gemm", "norm"))
    if t.executor == "native":
        assert t.verdict.accepted, t.verdict.line()
    else:
        assert t.compiled.startswith("compiled with nvcc"), t.compiled
    assert {s.op for s in t.program.library_calls()} == {"linear", "layer_norm"}


def test_library_choices_are_checked_in_one_line():
    with pytest.raises(AkgError, match=r"unknown library family blas: choose from gemm, attention"):
        build(problem_path("mm_square"), "cpp", "cpu", library=("blas",))
    with pytest.raises(AkgError, match=r"--pure generates every group: drop --library gemm or --pure"):
        build(problem_path("mm_square"), "cpp", "cpu", library=("gemm",), pure=True)
    assert Strategy.from_json({"rows": True, "conv": "library"}) == Strategy()  # a record from before families
    s = Strategy(library=("gemm", "norm"))
    assert Strategy.from_json(s.to_json()) == s and s.describe() == "rows=fused, conv=library, library=gemm+norm"
    assert families_of(["linear", "layer_norm", "add"]) == ("gemm", "norm")
    assert set(LIBRARY_FAMILIES) == {"gemm", "attention", "norm", "softmax", "reduce", "window", "scan"}


def test_the_tune_tries_each_family_then_the_winners_together():
    t = build(problem_path("l2_gemm_gelu_softmax_layernorm"), "cpp", "cpu", tuned=False)
    got = [s.describe() for s in strategies_for(t)]
    assert got == ["rows=fused, conv=library", "rows=split, conv=library", "rows=fused, conv=library, library=gemm",
                   "rows=fused, conv=library, library=norm", "rows=fused, conv=library, library=softmax"]
    singles = [(Strategy(), 1.0), (Strategy(rows=False), 0.5), (Strategy(library=("softmax",)), 0.9),
               (Strategy(library=("gemm",)), 0.8), (Strategy(library=("norm",)), 1.2)]
    assert _together(singles, 1.0) == Strategy(library=("gemm", "softmax"))  # table order, winners only
    assert _together(singles[:4], 0.85) is None  # one winner: nothing to combine
    assert _together(singles[:4] + [(Strategy(library=("gemm", "norm")), 0.7)], 0.85) is None  # singles only
    # the fastest library strategy that beats the default grows by each family it lacks, once
    grown: set[Strategy] = set()
    fams = ["gemm", "norm", "softmax"]
    assert _grow(singles, fams, grown) == [Strategy(library=("gemm", "norm")), Strategy(library=("gemm", "softmax"))]
    assert _grow(singles, fams, grown) == []  # gemm already grown
    two = singles + [(Strategy(library=("gemm", "norm")), 0.6), (Strategy(library=("gemm", "softmax")), 0.95)]
    assert _grow(two, fams, grown) == [Strategy(library=("gemm", "norm", "softmax"))]
    assert _grow([(Strategy(), 0.5), *singles[2:]], fams, set()) == []  # no family beats the default
    # a backend that generates no windows already calls the library for pooling: nothing to try
    pools = build(problem_path("pool_max_1d_2d_3d"), "numpy", "cpu", tuned=False)
    assert all(s.library != ("window",) for s in strategies_for(pools))


def test_tune_measures_library_families_and_translate_takes_the_fastest(tmp_path, monkeypatch):
    monkeypatch.setenv("AKG_CACHE_DIR", str(tmp_path))
    path = problem_path("l2_gemm_gelu_softmax_layernorm")
    rep = tune(str(path), "cpu", "cpp", budget=1, out=tmp_path / "tuned.py")
    tried = {s["strategy"]: s for s in rep["strategies"]}
    assert {"rows=fused, conv=library, library=gemm", "rows=fused, conv=library, library=norm",
            "rows=fused, conv=library, library=softmax"} <= set(tried)
    assert all(s["verdict"].startswith("accepted") and s["time_s"] > 0 for s in tried.values())
    # the families that won, as the tuner picked them: each scaled by its own run's eager time (tune._steadied);
    # the choice then follows the head-to-head run (head_to_head_score_s)
    default_s = tried["rows=fused, conv=library"]["score_s"]
    winners = [f for f in ("gemm", "norm", "softmax")
               if tried[f"rows=fused, conv=library, library={f}"]["score_s"] < default_s]
    if len(winners) > 1:  # the winners measured together when there are two or more
        assert f"rows=fused, conv=library, library={'+'.join(winners)}" in tried
    combined = [s for s in rep["strategies"][5:]]  # then the best grown, one family at a time
    assert all(s["strategy"].startswith("rows=fused, conv=library, library=") and "+" in s["strategy"]
               for s in combined), combined
    # the choice: every accepted strategy timed head to head in one run
    fastest = min(tried.values(), key=lambda s: s.get("head_to_head_score_s", s["score_s"]))["strategy"]
    assert rep["strategy"] == fastest
    t = build(path, "cpp", "cpu")  # the database's fastest, its library calls in the plan
    assert t.strategy.describe() == fastest and t.strategy_s is not None and math.isfinite(t.strategy_s)
    called = {s.op for s in t.program.library_calls()}
    assert all(set(LIBRARY_FAMILIES[f]) & called for f in t.strategy.library)
    assert TuningDB().count() >= rep["measured"]
    # a second tune is served from the database: no candidate measured, no strategy re-timed; only the
    # chosen module is verified once
    again = tune(str(path), "cpu", "cpp", budget=1)
    assert again["measured"] == 0 and all(s.get("from_db") for s in again["strategies"])
    assert again["strategy"] == fastest and again["verdict"].startswith("accepted")
    assert [s["score_s"] for s in again["strategies"]] == [s["score_s"] for s in rep["strategies"]]


def test_translate_takes_library_from_the_command_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("AKG_CACHE_DIR", str(tmp_path))
    out = tmp_path / "m.py"
    assert main(["translate", str(problem_path("l2_gemm_scale_sigmoid_sum")), "--dsl", "cpp", "--target", "cpu",
                 "--library", "gemm", "--no-time", "-o", str(out), "--run-dir", str(tmp_path / "run")]) == 0
    assert "lib_linear: library call torch linear" in out.read_text()
    assert "the gemm family left to torch (--library), prologue and epilogue generated" in capsys.readouterr().out
    plan = strategy_of(out)  # what akg bench reports per group
    assert plan["strategy"] == "rows=fused, conv=library, library=gemm"
    assert "library linear" in plan["groups"]["0"] and "generated" in " ".join(plan["groups"].values())
    assert main(["translate", str(problem_path("mm_square")), "--dsl", "cpp", "--target", "cpu", "--library", "blas",
                 "--no-time", "--run-dir", str(tmp_path / "run2")]) != 0
    assert "akg: error: unknown library family blas" in capsys.readouterr().err


def test_a_program_without_a_family_has_no_library_strategy():
    t = build(problem_path("ew_activations_a"), "cpp", "cpu", tuned=False)
    assert t.graph.meta["library_families"] == () and strategies_for(t) == [Strategy()]


def test_the_plan_names_the_library_that_runs_a_convolution_on_the_target():
    """oneDNN on the CPU, cuDNN on an NVIDIA GPU (the plan said cuDNN for both)."""
    from akg_agent.agents.designer import rules_plan

    p = problem_path("l2_conv_relu_biasadd")
    cpu, gpu = (" ".join(g.why for g in rules_plan(build(p, d, t), 0.5).groups)
                for d, t in (("cpp", "cpu"), ("triton", "h100")))
    assert "torch library call (oneDNN)" in cpu and "cuDNN" not in cpu
    assert "torch library call (cuDNN)" in gpu


def test_a_library_result_only_returned_keeps_torchs_layout_one_a_kernel_reads_is_made_contiguous():
    """An attention's output comes back transposed in memory: returned as it is (as eager returns it, no
    copy), made contiguous only where a generated kernel indexes it."""
    alone = render(build(problem_path("attention_sdpa"), "cpp", "cpu", tuned=False, library=("attention",)))
    calls = [ln for ln in alone.splitlines() if "F.scaled_dot_product_attention(" in ln and " = " in ln]
    assert len(calls) == 2 and not any(ln.rstrip().endswith(".contiguous()") for ln in calls), calls
    t = build(problem_path("l2_gemm_scale_sigmoid_sum"), "cpp", "cpu", tuned=False, library=("gemm",))
    read = [ln for ln in render(t).splitlines() if "F.linear(" in ln and " = " in ln]
    assert len(read) == 1 and read[0].rstrip().endswith(".contiguous()"), read


def test_untuned_16bit_convolutions_on_an_nvidia_gpu_read_channels_last_operands(tmp_path):
    """cuDNN's tensor-core convolutions read NHWC: over channels-first tensors torch reordered both operands
    around every call (a third of a bf16 ResNet's GPU time on the H200). fp32 ones only where torch allows
    TF32 (`test_channels_last`): over NHWC fp32 operands cuDNN picks TF32 kernels where torch's NCHW call
    may be exact (an fp32 ResNet's running mean 1e-4 off on the H200). A single convolution stays on the
    library's own reorders (its transpositions would cancel against nothing: 0.59-0.80x eager channels-last
    in the real-size set's bf16 programs on the H200), unless its output is read channels-last anyway (a
    ViT's patches transposed to tokens)."""
    p = ROOT / "tests" / "fixtures" / "conv_bf16_relu_biasadd.py"
    gpu, cpu = build(p, "triton", "h200"), build(p, "cpp", "cpu")
    assert gpu.strategy.conv == "channels-last" and "cuDNN convolution(s) over channels-last" in gpu.strategy_why
    assert all(s.attrs["channels_last"] for s in gpu.program.library_calls() if s.op == "conv")
    assert cpu.strategy.conv == "channels-last"  # two convolutions in an inference graph: oneDNN too
    body = "return torch.relu(self.conv2(torch.relu(self.conv(x)))) + self.bias"
    single, patches = tmp_path / "single.py", tmp_path / "patches.py"
    single.write_text(p.read_text().replace(body, "return torch.relu(self.conv(x)) + self.bias"))
    patches.write_text(p.read_text().replace(body, "return (self.conv(x).flatten(2).transpose(1, 2) + 1).relu()"))
    assert build(single, "triton", "h200").strategy.conv == "library"
    assert build(single, "cpp", "cpu").strategy.conv == "library"
    assert build(patches, "triton", "h200").strategy.conv == "channels-last"
    assert build(p, "triton", "h200", tuned=False).strategy.conv == "library"  # the plan exactly as asked
    fp32 = build(problem_path("l2_conv_relu_biasadd"), "triton", "h200")
    assert fp32.strategy.conv == "library" and not any(s.attrs["channels_last"] for s in
                                                        fp32.program.library_calls() if s.op == "conv")
