"""Library ops as generated kernels: convolutions as implicit GEMMs (backends whose manifest lists
"conv", on request) and pooling windows as reductions (manifest "window"): lowering, the kernel-IR
interpreter against the graph interpreter, and what stays a declared library call."""

from __future__ import annotations

import pytest
import torch

from akg_agent.agents.designer import rules_plan
from akg_agent.translate import build, render
from ir import run
from ir.kernel.interp import run_program
from ir.kernel.ir import Load, free_vars, walk
from ir.kernel.lower import lower
from ir.passes import run_passes
from ir.passes.fusion import fuse

CONVS = ["conv1d_strided_dilated", "conv2d_asym_kernel", "conv2d_depthwise_separable", "conv2d_grouped_same",
         "conv3d_basic", "l2_conv_relu_biasadd", "l2_conv3d_softmax_pool"]


@pytest.mark.parametrize("name", CONVS)
def test_implicit_gemm_matches_the_graph(name, lifted):
    problem, g = lifted(name)
    run_passes(g, ["simplify", "decompose", "simplify"])
    prog = lower(g, fuse(g), frozenset({"conv"}))
    grouped = [n for n in g.nodes if n.op == "conv" and n.attrs["groups"] > 1]
    assert [s.op for s in prog.library_calls()].count("conv") == len(grouped)  # grouped convs stay torch calls
    inputs = [x for x in problem.make_inputs(2) if isinstance(x, torch.Tensor)]
    for a, b in zip(run(g, inputs), run_program(prog, inputs, g.weights), strict=True):
        torch.testing.assert_close(b, a, atol=1e-4, rtol=1e-4)


def test_conv_with_epilogue_is_one_generated_gemm_when_asked(tmp_path):
    from akg_agent.translate import translate
    from ir.errors import AkgError

    from .conftest import problem_path

    # the default plan keeps cuDNN (a declared library call) with the epilogue fused after it
    t = build(problem_path("l2_conv_relu_biasadd"), "triton", "h100")
    assert [s.op for s in t.program.library_calls()] == ["conv"]
    t = build(problem_path("l2_conv_relu_biasadd"), "triton", "h100", conv="generated")
    assert [k.kind for k in t.program.kernels()] == ["matmul"] and not t.program.library_calls()
    src = render(t)
    assert "AKG_LIBRARY_CALLS = []" in src and src.count("tl.dot(") == 1
    t = translate(problem_path("conv2d_asym_kernel"), "triton", "h100", tmp_path / "c.py", timing=False,
                  seeds=(0, 1), conv="generated")
    assert t.verdict.accepted and not t.program.library_calls(), t.verdict.line()
    with pytest.raises(AkgError, match="does not generate convolutions"):
        build(problem_path("l2_conv_relu_biasadd"), "numpy", "cpu", conv="generated")  # lists no conv, no window
    # --pure: every group generated where the backend can, else an error naming what it cannot
    t = build(problem_path("l2_conv_relu_biasadd"), "triton", "h100", pure=True)
    assert not t.program.library_calls() and [k.kind for k in t.program.kernels()] == ["matmul"]
    t = build(problem_path("l2_conv_relu_biasadd"), "cpp", "cpu", pure=True)  # C++'s blocked GEMM template
    assert not t.program.library_calls() and [k.kind for k in t.program.kernels()] == ["matmul"]
    build(problem_path("convT1d"), "cpp", "cpu", pure=True)  # a transposed one gathers into each output
    with pytest.raises(AkgError, match=r"--pure: the cpp backend generates no kernel for conv_transpose with "
                                       r"groups=2 \(group 0\) in convT2d_grouped.py"):
        build(problem_path("convT2d_grouped"), "cpp", "cpu", pure=True)
    t = build(problem_path("rand_in_forward"), "cpp", "cpu", pure=True)  # random draws stay torch's generator
    assert {s.op for s in t.program.library_calls()} == {"random"} and t.program.kernels()


POOLS = ["pool_max_1d_2d_3d", "pool_avg_1d_2d_3d", "l2_conv3d_softmax_pool", "l2_convT_bn_tanh_pool_gn",
         "pool_adaptive"]


@pytest.mark.parametrize("name", POOLS)
def test_pooling_windows_match_the_graph(name, lifted):
    # dilation, padding, ceil_mode, count_include_pad=False and divisor_override are all in these problems
    problem, g = lifted(name)
    run_passes(g, ["simplify", "decompose", "simplify"])
    prog = lower(g, fuse(g), frozenset({"window"}))
    libs = [s.op for s in prog.library_calls()]
    assert "max_pool" not in libs and "avg_pool" not in libs
    assert ("adaptive_avg_pool" in libs) == (name == "pool_adaptive")  # adaptive windows stay torch calls
    for seed in (1, 2):
        inputs = [x for x in problem.make_inputs(seed) if isinstance(x, torch.Tensor)]
        for a, b in zip(run(g, inputs), run_program(prog, inputs, g.weights), strict=True):
            torch.testing.assert_close(b, a, atol=1e-5, rtol=1e-5)


SCANS = ["scan_cumsum_cumprod", "scan_exclusive_cumsum", "scan_masked_cumsum", "scan_reverse_cumsum"]


@pytest.mark.parametrize("name", SCANS)
def test_scans_match_the_graph(name, lifted):
    problem, g = lifted(name)
    run_passes(g, ["simplify", "decompose", "simplify"])
    prog = lower(g, fuse(g), frozenset({"scan"}))
    assert not {"cumsum", "cumprod"} & {s.op for s in prog.library_calls()}
    assert any(k.kind == "scan" for k in prog.kernels())
    for seed in (1, 2):
        inputs = [x for x in problem.make_inputs(seed) if isinstance(x, torch.Tensor)]
        for a, b in zip(run(g, inputs), run_program(prog, inputs, g.weights), strict=True):
            torch.testing.assert_close(b, a, atol=1e-5, rtol=1e-5)


def test_backends_generate_windows_only_where_their_manifest_says():
    from .conftest import problem_path

    t = build(problem_path("pool_avg_1d_2d_3d"), "cpp", "cpu")
    # generated, each small window unrolled into a pointwise kernel (ir/kernel/unroll.py)
    assert not t.program.library_calls() and [k.kind for k in t.program.kernels()] == ["pointwise"] * 3
    for dsl, target in (("cuda-c", "h100"), ("tilelang", "h100"), ("metal", "m4-max")):
        t = build(problem_path("pool_avg_1d_2d_3d"), dsl, target)
        assert not t.program.library_calls(), dsl
    t = build(problem_path("pool_avg_1d_2d_3d"), "numpy", "cpu")  # the example backend lists no "window"
    assert [s.op for s in t.program.library_calls()] == ["avg_pool"] * 3


@pytest.mark.parametrize("dsl", ["tilelang", "metal"])
@pytest.mark.parametrize("name", ["pool_max_1d_2d_3d", "dw_conv"])
def test_pooling_and_depthwise_windows_verify_pure_in_every_backend(dsl, name, tmp_path):
    """TileLang, Metal and CUDA-C generate pooling and depthwise convolutions too (their windows lower to
    primitives): --pure modules verified through TileLang's C target and the Metal emulator (the CUDA-C ones
    compile here: test_cuda_c_compiles_windows). Pallas does not yet: a group norm fused after a generated
    pool failed Mosaic's TPU lowering."""
    from akg_agent.verifier import verify

    from .conftest import problem_path

    prob = problem_path(name) if name != "dw_conv" else _depthwise(tmp_path)
    t = build(prob, dsl, "m4-max" if dsl == "metal" else "h100", pure=True)
    assert not t.program.library_calls()
    cand = tmp_path / "cand.py"
    cand.write_text(render(t))
    v = verify(prob, cand, target="m4-max" if dsl == "metal" else "h100", seeds=(0, 1))
    assert v.accepted, v.line()


def _depthwise(tmp_path):
    p = tmp_path / "dw_conv.py"
    p.write_text("import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n"
                 "    def __init__(self):\n        super().__init__()\n"
                 "        self.conv = nn.Conv2d(8, 8, 3, padding=1, groups=8)\n\n"
                 "    def forward(self, x):\n        return self.conv(x)\n\n\n"
                 "def get_inputs():\n    return [torch.randn(2, 8, 13, 11)]\n\n\n"
                 "def get_init_inputs():\n    return []\n")
    return p


def test_cuda_c_compiles_windows(tmp_path):
    from akg_agent.translate import compile_only

    from .conftest import problem_path

    for prob in (problem_path("pool_max_1d_2d_3d"), _depthwise(tmp_path)):
        t = build(prob, "cuda-c", "h100", pure=True)
        assert not t.program.library_calls()
        assert compile_only(t).startswith("compiled with nvcc for sm_90a")


def test_pooling_kernels_verify_through_tritons_interpreter(tmp_path):
    from akg_agent.verifier import verify

    from .conftest import problem_path

    t = build(problem_path("pool_max_1d_2d_3d"), "triton", "h100")
    assert not t.program.library_calls()  # Triton's manifest lists "window"
    cand = tmp_path / "cand.py"
    cand.write_text(render(t))
    v = verify(problem_path("pool_max_1d_2d_3d"), cand, target="h100", seeds=(0, 1))
    assert v.accepted, v.line()


@pytest.mark.parametrize("chunk", [None, 16])
@pytest.mark.parametrize("name", ["scan_cumsum_cumprod", "scan_reverse_cumsum", "scan_exclusive_cumsum"])
def test_triton_scans_verify(name, chunk, tmp_path):
    """Generated Triton scans, in one tile and (BR=16) swept in chunks with the running total carried,
    forwards and reversed; through the interpreter here, natively where a GPU exists."""
    from akg_agent.verifier import verify

    from .conftest import problem_path

    t = build(problem_path(name), "triton", "h100")
    assert not t.program.library_calls()
    scans = [k for k in t.program.kernels() if k.kind == "scan"]
    assert scans
    for k in scans:
        if chunk:
            t.schedules[k.name] = t.schedules[k.name].replace(BR=chunk, BM=4)
    src = render(t)
    assert ("for ci in range(" in src) == bool(chunk)
    cand = tmp_path / "cand.py"
    cand.write_text(src)
    v = verify(problem_path(name), cand, target="h100", seeds=(0, 1))
    assert v.accepted, v.line()


def test_transposed_convolutions_gather_into_each_output_and_verify_pure(lifted, tmp_path):
    """Transposed convolutions as implicit GEMMs gathering into each output (the kernel-IR interpreter
    against the graph's): every kernel offset a tap, masked where it lands between input positions, so
    the weights are one matrix for every output (no packed copy per output position). A grouped one
    stays a library call. Verified pure in C++ here and through Triton's interpreter."""
    from akg_agent.verifier import verify

    from .conftest import ROOT

    problem, g = lifted("conv_transpose_mix")
    run_passes(g, ["simplify", "decompose", "simplify"])
    prog = lower(g, fuse(g), frozenset({"conv"}))
    assert not prog.library_calls()
    extents = sorted(r.axes[0].extent for k in prog.kernels() for r in k.reductions() if r.op == "dot")
    assert extents == [3 * 4, 4 * 3 * 4, 2 * 4 * 4 * 4]
    for k in prog.kernels():  # B, the weights, read at the reduction index and the output channel alone
        b = next(e for e in walk(k.expr) if isinstance(e, Load) and e.buf.role == "param" and len(e.index) > 2)
        assert free_vars(b) <= {k.reductions()[0].axes[0].name, k.coords[1].name}
    inputs = [x for x in problem.make_inputs(2) if isinstance(x, torch.Tensor)]
    for a, b in zip(run(g, inputs), run_program(prog, inputs, g.weights), strict=True):
        torch.testing.assert_close(b, a, atol=1e-4, rtol=1e-4)
    plan = rules_plan(build(ROOT / "tests" / "fixtures" / "conv_transpose_mix.py", "cpp", "cpu", tuned=False), 0.5)
    whys = [g.why for g in plan.groups if "conv_transpose" in g.ops]  # the default plan says how to get it
    assert len(whys) == 3 and all("--pure generates it" in why for why in whys), whys
    _, grouped = lifted("convT2d_grouped")
    assert [s.op for s in lower(grouped, fuse(grouped), frozenset({"conv"})).library_calls()] == ["conv_transpose"]
    path = ROOT / "tests" / "fixtures" / "conv_transpose_mix.py"
    for dsl in ("cpp", "triton"):
        t = build(path, dsl, "cpu" if dsl == "cpp" else "h100", pure=True)
        assert not t.program.library_calls()
        cand = tmp_path / f"{dsl}.py"
        cand.write_text(render(t))
        v = verify(path, cand, target="cpu" if dsl == "cpp" else "h100", seeds=(0, 1))
        assert v.accepted, (dsl, v.line())
