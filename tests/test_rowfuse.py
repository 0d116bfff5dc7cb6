"""Row fusion: normalisations as one kernel per row, the kernel-IR interpreter against the graph
interpreter with and without it, the fallback, and the row templates' chunked path."""

from __future__ import annotations

import math

import pytest
import torch

from akg_agent.translate import build, render
from akg_agent.verifier import verify
from ir import Graph, TensorType, run
from ir.kernel.expand import expand_program
from ir.kernel.interp import run_program
from ir.kernel.lower import lower
from ir.kernel.rows import fuse_rows
from ir.passes import run_passes
from ir.passes.fusion import fuse

from .conftest import PROBLEMS, ROOT

FIXTURES = ROOT / "tests" / "fixtures"


def _prepared(lifted, name):
    problem, g = lifted(name)
    run_passes(g, ["simplify", "decompose", "simplify"])
    return problem, g


@pytest.mark.parametrize("name", [p.stem for p in PROBLEMS])
def test_kernel_interpreter_matches_graph_with_and_without_row_fusion(name, lifted):
    problem, g = _prepared(lifted, name)
    inputs = [x for x in problem.make_inputs(1) if isinstance(x, torch.Tensor)]
    torch.manual_seed(7)  # random ops draw from the global generator: the same draws on each side
    ref = run(g, inputs)
    for plan in (fuse(g), fuse_rows(g, fuse(g))):
        prog = lower(g, plan)
        # and with every composite op written in primitives, as renderers see them
        for p in (prog, expand_program(prog)):
            torch.manual_seed(7)
            got = run_program(p, inputs, g.weights)
            for a, b in zip(ref, got, strict=True):
                torch.testing.assert_close(b, a, atol=1e-5, rtol=1e-5, equal_nan=True)


def test_softmax_and_layernorm_become_one_row_kernel(lifted):
    _, g = _prepared(lifted, "l2_gemm_gelu_softmax_layernorm")
    assert len(fuse(g).groups) == 8
    plan = fuse_rows(g, fuse(g))
    assert [(grp.kind, grp.rows) for grp in plan.groups] == [("contraction", False), ("reduction", True)]
    assert [p.id for p in plan.groups[1].parts] == [1, 2, 3, 4, 5, 6, 7]
    assert "no longer stored: %softmax_amax" in str(plan)
    prog = lower(g, plan)
    assert [k.kind for k in prog.kernels()] == ["matmul", "rownorm"]
    # the row maximum is one reduction although softmax's exp is recomputed for the sum and the output
    assert sum(r.op == "max" for r in prog.kernels()[1].reductions()) == 1


def test_a_layer_norms_mean_is_computed_once_although_its_variance_reduces_it_again(lifted):
    problem, g = _prepared(lifted, "norm_layer_rms")
    prog = lower(g, fuse_rows(g, fuse(g)))
    ln = next(k for k in prog.kernels() if k.out.name.startswith("layer_norm"))
    # mean, and the variance's sum of squared deviations around that same mean: two row sums, not three
    assert ln.kind == "rownorm" and [r.op for r in ln.reductions()] == ["sum", "sum"]
    # the RMS norms: one mean square each
    assert sorted(len(k.reductions()) for k in prog.kernels()) == [1, 1, 2]
    inputs = problem.make_inputs(2)
    for a, b in zip(run(g, inputs), run_program(prog, inputs, g.weights), strict=True):
        torch.testing.assert_close(b, a, atol=1e-5, rtol=1e-5)


def test_row_fusion_does_not_merge_reductions_over_two_axes():
    from ir.lift import lift
    from ir.problem import load_problem

    problem = load_problem(FIXTURES / "rows_cross_axes.py")
    g = lift(problem)
    run_passes(g, ["simplify", "decompose", "simplify"])
    plan = fuse_rows(g, fuse(g))
    # the pass lowers a merge to check it first: the sum over rows stays out of the row kernel of the
    # sum over columns (x * x.sum(1)), and the lowering keeps what the pass merged
    [rows] = [grp for grp in plan.groups if grp.rows]
    assert {n.op for n in rows.nodes} == {"sum", "mul"} and len(plan.groups) == 3
    prog = lower(g, plan)
    assert [k.kind for k in prog.kernels()] == ["rownorm", "reduce", "pointwise"]
    inputs = problem.make_inputs(0)
    torch.testing.assert_close(run_program(prog, inputs, g.weights)[0], run(g, inputs)[0])


def test_backends_without_a_row_template_keep_the_split_plan():
    t = build(FIXTURES / "rows_long.py", "numpy", "cpu")  # the out-of-tree example backend
    assert "rownorm" not in [k.kind for k in t.program.kernels()]
    t = build(FIXTURES / "rows_long.py", "pallas", "tpu-v5p")  # Pallas' row template is the GPU's
    assert "rownorm" not in [k.kind for k in t.program.kernels()]
    t = build(FIXTURES / "rows_long.py", "pallas", "h100")
    assert [k.kind for k in t.program.kernels()] == ["rownorm", "rownorm"]
    t = build(FIXTURES / "rows_long.py", "triton", "h100")
    assert [k.kind for k in t.program.kernels()] == ["rownorm", "rownorm"]


@pytest.mark.parametrize("dsl,target,br", [("triton", "h100", None), ("triton", "h100", 16), ("cpp", "cpu", None),
                                           ("metal", "m4-max", None), ("pallas", "h100", None),
                                           ("pallas", "h100", 16), ("tilelang", "h100", None),
                                           ("tilelang", "h100", 16)])
def test_row_kernels_verify_in_one_tile_and_in_chunks(dsl, target, br, tmp_path):
    t = build(FIXTURES / "rows_long.py", dsl, target)
    rows = [k for k in t.program.kernels() if k.kind == "rownorm"]
    assert len(rows) == 2
    if br is not None:  # rows of 100 in tiles of 16: every reduction sweeps the row in chunks
        for k in rows:
            t.schedules[k.name] = t.schedules[k.name].replace(BR=br)
    src = render(t)
    if dsl == "triton":
        body = src[src.index("def k0_"):src.index("def k1_")]
        loads = body.count("tl.load(x")
        # one tile: x read once; in chunks, one sweep per distinct reduction but the softmax's maximum and
        # sum, swept together (3: the layer norm's mean is also its variance's), and one for the output
        assert loads == (1 if br is None else 4), body
        assert ("for start in range(0, 100, BR)" in body) == (br is not None)
    if dsl == "tilelang":  # one sweep per reduction (4 in chunks, 1 a tile) and one for the output
        body = src[src.index("def k0_"):src.index("def k1_")]
        assert body.count("g_x[") == 5 and body.count(f"for c in T.serial({7 if br else 1})") == 5, body
    if dsl == "pallas":
        body = src[src.index("def k0_"):src.index("def k1_")]
        # as Triton: the softmax's maximum and sum in one sweep
        assert body.count("_akg_ld(x_ref") == (1 if br is None else 4), body
        assert ("jax.lax.fori_loop(0, 7, write, 0)" in body) == (br is not None)
    cand = tmp_path / "cand.py"
    cand.write_text(src)
    v = verify(FIXTURES / "rows_long.py", cand, target=target, seeds=(0, 1))
    assert v.accepted, v.line()


def test_reductions_over_a_middle_axis_take_tall_tiles_in_chunks(tmp_path):
    from dsl_backends.triton.backend import BACKEND

    t = build(FIXTURES / "sum_middle.py", "triton", "h100")
    for k in t.program.kernels():  # the GPU's schedule, checked here through the interpreter
        s = t.schedules[k.name] = BACKEND.default_schedule(k, t.target)
        assert (s["BM"], s["BR"], s["num_warps"]) == (128, 64, 8)  # 216 outputs: two programs of 128
    src = render(t)
    assert src.count("for start in range(0, 100, BR)") == 2
    cand = tmp_path / "cand.py"
    cand.write_text(src)
    v = verify(FIXTURES / "sum_middle.py", cand, target="h100", seeds=(0, 1))
    assert v.accepted, v.line()


def test_akg_ir_shows_the_row_fused_plan(capsys):
    from akg_agent.cli import main

    assert main(["ir", str(ROOT / "tests" / "problems" / "softmax_logsoftmax.py"), "--passes",
                 "simplify,decompose,simplify,rows"]) == 0
    out = capsys.readouterr().out
    assert "group 0 [reduction, rows] anchor %softmax_amax: amax, sub, exp, sum, div -> %softmax_div" in out
    notes = [ln for ln in out.splitlines() if "row fusion:" in ln]
    assert notes == ["// row fusion: fusion's groups 0, 1, 2, 3 -> group 0, one kernel per row (no longer stored: "
                     "%softmax_amax, %softmax_exp, %softmax_sum)",
                     "// row fusion: fusion's groups 4, 5, 6, 7 -> group 1, one kernel per row (no longer stored: "
                     "%log_softmax_amax, %log_softmax_sub, %log_softmax_log)"]


GROUP_NORM = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.gn = nn.GroupNorm(4, 16)

    def forward(self, x):
        return torch.tanh(self.gn(x))


def get_inputs():
    return [torch.randn(2, 16, 30, 30)]


def get_init_inputs():
    return []
"""


# a group norm written by hand over flat groups ([N, G, C/G*H*W]), its per-channel affine after the reshape
# back: nn.GroupNorm is lowered in the group's [N, G, C/G, H*W] coordinates (one row kernel), this is not
GROUP_NORM_FLAT = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.rand(16) + 0.5)
        self.b = nn.Parameter(torch.randn(16))

    def forward(self, x):
        g = x.reshape(2, 4, 3600)
        y = (g - g.mean(-1, keepdim=True)) * torch.rsqrt(g.var(-1, unbiased=False, keepdim=True) + 1e-5)
        return torch.tanh(y.reshape(2, 16, 30, 30) * self.w[:, None, None] + self.b[:, None, None])


def get_inputs():
    return [torch.randn(2, 16, 30, 30)]


def get_init_inputs():
    return []
"""


@pytest.mark.parametrize("hw,stream,segments", [(30, False, True), (16, True, True), (30, True, False)])
def test_a_group_norm_is_one_row_kernel_per_group(tmp_path, hw, stream, segments):
    """nn.GroupNorm in its group's coordinates: statistics and the per-channel affine (a strided read there)
    in one kernel per (sample, group), then a view. The C++ sweep runs a loop per channel of the group (its
    weight fixed in it, not gathered per element), streamed blocks too where they never straddle two
    channels (H*W a multiple of the block); it verifies natively either way."""
    from dsl_backends.cpp.stream import STREAM_BLOCK

    path = tmp_path / "gn.py"
    path.write_text(GROUP_NORM.replace("30, 30", f"{hw}, {hw}"))
    t = build(path, "cpp", "cpu")
    assert [k.kind for k in t.program.kernels()] == ["rownorm"]
    k = t.program.kernels()[0]
    t.schedules[k.name] = t.schedules[k.name].replace(stream=stream)
    text = render(t)
    step = STREAM_BLOCK if stream else hw * hw
    assert (f"akg_cb < {4 * hw * hw}; akg_cb += {step}) {{" in text) == (segments or stream), text
    assert (f"const int64_t akg_first = akg_cb % {hw * hw} - akg_cb;" in text) == segments, text
    cand = tmp_path / "cand.py"
    cand.write_text(text)
    v = verify(path, cand, target="cpu", seeds=(0, 1))
    assert v.accepted, v.line()


def test_a_merge_that_would_recompute_per_element_is_refused(tmp_path, monkeypatch):
    """A group norm over flat groups, its group index read through a reshape: a row kernel would make every
    element its own row and recompute the group's statistics per element. Row fusion lowers the merge,
    counts the kernel IR's work against the parts' and keeps the split plan; with that check off, the cost
    gate refuses the plan before rendering."""
    from akg_agent import translate as tr
    from ir.errors import AkgError
    from ir.kernel import rows
    from ir.kernel.analysis import work

    path = tmp_path / "gn.py"
    path.write_text(GROUP_NORM_FLAT)
    t = build(path, "cpp", "cpu")
    assert "rownorm" not in [k.kind for k in t.program.kernels()]
    assert max(map(work, t.program.kernels())) < 64 * 2 * 16 * 30 * 30  # the split plan: no recomputation
    monkeypatch.setattr(rows, "MERGE_GATE", 1e12)
    with pytest.raises(AkgError, match=r"makes kernel k\d+_\w+ do .* operations where its group needs .*over 64x"):
        build(path, "cpp", "cpu")
    monkeypatch.setattr(tr, "COST_GATE", 1e12)
    assert "rownorm" in [k.kind for k in build(path, "cpp", "cpu").program.kernels()]


@pytest.mark.parametrize("op", ["relu", "leaky_relu", "hardtanh", "clamp", "elu", "selu", "silu", "mish",
                                "softplus", "sigmoid", "hardswish", "hardsigmoid"])  # not gelu: torch's is NaN at +inf
def test_expanded_activations_keep_torchs_values_at_infinities_and_nan(op):
    """relu(-inf) is 0: an expansion as x * 0 made it NaN (a masked attention's -inf then ReLU)."""
    x = torch.tensor([-math.inf, -3.0, -0.0, 0.0, 2.5, math.inf, math.nan])
    g = Graph("act")
    xin = g.input("x", TensorType((7,), "f32"))
    g.outputs = [g.add(op, [xin], {"min": -1.0, "max": 1.0} if op == "clamp" else {})]
    plan = fuse(g)
    got = run_program(expand_program(lower(g, plan)), [x], g.weights)[0]
    torch.testing.assert_close(got, run(g, [x])[0], equal_nan=True)


def test_expansion_keeps_a_gemm_read_by_two_composites_one_reduction():
    """mish(mish(x @ w)): the expansion re-walks what it has expanded; copying unchanged nodes there split
    the GEMM into three dots (KernelBench level 2 #29 then failed in Triton: 'not a single GEMM')."""
    g = Graph("mm_mish")
    x = g.input("x", TensorType((8, 16), "f32"))
    w = g.input("w", TensorType((16, 12), "f32"))
    g.outputs = [g.add("mish", [g.add("mish", [g.add("matmul", [x, w], {})], {})], {})]
    plan = fuse(g)
    prog = lower(g, plan)
    assert [len(k.reductions()) for k in prog.kernels()] == [1]
    expanded = expand_program(prog)
    assert [len(k.reductions()) for k in expanded.kernels()] == [1]
    xs = [torch.randn(8, 16), torch.randn(16, 12)]
    torch.testing.assert_close(run_program(expanded, xs, g.weights)[0], run(g, xs)[0])


@pytest.mark.parametrize("dsl,sweep", [("triton", "for start in range(0, 3600, BR)"),
                                       ("pallas", "jax.lax.fori_loop(0, 8, chunk"),
                                       ("tilelang", "for c in T.serial(8)")])
def test_a_nested_reduction_longer_than_one_tile_sweeps_once_per_level(tmp_path, dsl, sweep):
    """A group norm's variance around its mean, over flat groups longer than one tile (KernelBench level 2
    #21 and the real-size set's group norm were refused: 'a nested reduction longer than one tile'):
    the reduce template sweeps the group once for the mean, then once for the variance around it."""
    path = tmp_path / "gn.py"
    path.write_text(GROUP_NORM_FLAT)
    t = build(path, dsl, "h100")
    nested = [k for k in t.program.kernels() if k.kind == "reduce" and len(k.reductions()) > 1]
    assert nested
    for k in nested:  # groups of 3600 in tiles of 512
        t.schedules[k.name] = t.schedules[k.name].replace(BR=512)
    src = render(t)
    assert src.count(sweep) == 2 * len(nested)
    cand = tmp_path / "cand.py"
    cand.write_text(src)
    v = verify(path, cand, target="h100", seeds=(0, 1))
    assert v.accepted, v.line()


def test_a_softmax_sums_with_its_running_maximum_in_one_sweep(tmp_path):
    """Rows in chunks: the maximum and the sum of exp(x - maximum) in one sweep (the sum rescaled as the
    maximum grows), right where leading chunks are all -inf; then the output's sweep."""
    problem = FIXTURES / "softmax_neg_inf.py"
    t = build(problem, "triton", "h100")
    for k in t.program.kernels():
        t.schedules[k.name] = t.schedules[k.name].replace(BR=16)
    src = render(t)
    for name in ("k0_", "k1_"):
        body = src[src.index(f"def {name}"):]
        body = body[:body.index("@triton.jit")] if "@triton.jit" in body else body
        assert body.count("for start in range(0, 100, BR)") == 2 and "tl.exp(acc0 - acc0_z)" in body, body
        # the row stays in L2 for the output's sweep, which then lets it go
        for policy in ("evict_last", "evict_first"):
            assert f'other=0.0, eviction_policy="{policy}")' in body
        # and the output streams past L2 (a store that evicts first)
        assert body.count('mask=rmask & cmask, eviction_policy="evict_first")') == 1, body
    cand = tmp_path / "cand.py"
    cand.write_text(src)
    v = verify(problem, cand, target="h100", seeds=(0, 1))
    assert v.accepted, v.line()


def test_pallas_rows_sum_with_their_running_maximum_in_one_sweep(tmp_path):
    """Pallas' row template on the GPU: the same online sweep as Triton's, in a fori_loop carrying the
    (maximum, sum) pair, right where leading chunks are all -inf (through Pallas' interpreter)."""
    problem = FIXTURES / "softmax_neg_inf.py"
    t = build(problem, "pallas", "h100")
    assert {k.kind for k in t.program.kernels()} == {"rownorm"}
    for k in t.program.kernels():
        t.schedules[k.name] = t.schedules[k.name].replace(BR=16)
    src = render(t)
    for name in ("k0_", "k1_"):
        body = src[src.index(f"def {name}"):]
        body = body[:body.index("def k1_")] if name == "k0_" else body
        assert body.count("jax.lax.fori_loop(0, 7, ") == 2 and "acc_s * jnp.exp(acc_m - safe)" in body, body
    cand = tmp_path / "cand.py"
    cand.write_text(src)
    v = verify(problem, cand, target="h100", seeds=(0, 1))
    assert v.accepted, v.line()


def test_only_a_sum_of_exp_of_the_same_values_less_their_maximum_pairs_with_it():
    from ir.kernel.analysis import online_max
    from ir.kernel.ir import Buf, Load, Op, Reduce, Var

    x, y = Buf("x", (4, 8), "f32", "input"), Buf("y", (4, 8), "f32", "input")
    c, r, s = Var("c", 4), Var("r", 8), Var("s", 8)
    m = Reduce("max", Load(x, (c, r)), (r,), "f32")

    def total(v: Buf, fn: str = "exp") -> Reduce:
        return Reduce("sum", Op(fn, (Op("sub", (Load(v, (c, s)), m), (), "f32"),), (), "f32"), (s,), "f32")

    assert online_max(total(x)) is m
    assert online_max(total(y)) is None  # another tensor's values less x's maximum
    assert online_max(total(x, "tanh")) is None


POST_NORM = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.dense = nn.Linear(96, 64)
        self.norm = nn.LayerNorm(64)

    def forward(self, h, residual):
        y = self.dense(h) + residual
        return self.norm(y){extra}


def get_inputs():
    return [torch.randn(4, 16, 96), torch.randn(4, 16, 64)]


def get_init_inputs():
    return []
'''


@pytest.mark.parametrize("dsl,target", [("triton", "h200"), ("cpp", "cpu")])
def test_a_library_gemms_epilogue_joins_the_layer_norm_that_reads_it(tmp_path, dsl, target):
    """BERT's post-norm: with the GEMM left to cuBLAS, its residual add went to a pointwise kernel of its
    own, storing the sum for the layer norm's row kernel to read back; it is computed in the row kernel now,
    the call kept (and, where the sum is also returned, stored as before)."""
    from akg_agent.translate import translate

    path = tmp_path / "post_norm.py"
    path.write_text(POST_NORM.format(extra=""))
    t = translate(path, dsl, target, library=("gemm",), timing=False, seeds=(0, 1))
    assert [k.kind for k in t.program.kernels()] == ["rownorm"] and t.verdict.accepted
    assert [s.op for s in t.program.library_calls()] == ["linear"]
    assert any("(its epilogue)" in n for n in t.plan.notes)
    path.write_text(POST_NORM.format(extra=", y"))  # the sum is an output too: stored by its own kernel
    t = build(path, dsl, target, library=("gemm",))
    assert sorted(k.kind for k in t.program.kernels()) == ["pointwise", "rownorm"]
    assert [s.op for s in t.program.library_calls()] == ["linear"]
