"""Sibling outputs: a kernel whose value another kernel of the same shape computes on the way is folded
into it as one more output (`Kernel.also`), so the input is read once (ir.kernel.siblings)."""

from __future__ import annotations

import pytest
import torch

from akg_agent.translate import build, render, translate
from dsl_backends import available, get_backend
from ir import run
from ir.kernel.expand import expand_program
from ir.kernel.interp import run_program
from ir.kernel.ir import Kernel, Load, walk
from ir.kernel.lower import lower
from ir.kernel.siblings import merge_siblings
from ir.passes import run_passes
from ir.passes.fusion import fuse

from .conftest import ROOT

FIXTURE = ROOT / "tests" / "fixtures" / "siblings.py"


def _program(lifted):
    problem, g = lifted("siblings")
    run_passes(g, ["simplify", "decompose", "simplify"])
    return problem, g, expand_program(lower(g, fuse(g)))


def test_a_value_computed_inside_another_kernel_is_stored_by_it(lifted):
    problem, g, prog = _program(lifted)
    merged = merge_siblings(prog.steps)
    before = {k.out.name: k for k in prog.kernels()}
    kernels = [s for s in merged if isinstance(s, Kernel)]
    # var + its mean, std + its mean, y's mean + y's sum; the row maximum and twice the row sum stay apart (neither
    # value is inside another kernel's)
    assert len(kernels) == len(before) - 3
    pairs = sorted(tuple(b.name for b in k.outs()) for k in kernels if k.also)
    assert [len(p) for p in pairs] == [2, 2, 2]
    for k in kernels:
        for b, e in k.also:  # the stored node is the very one the kernel computes (printed once)
            assert any(x is e for x in walk(k.expr))
            assert b == before[b.name].out
    inputs = problem.make_inputs(3)
    want = run(g, inputs)
    got = run_program(type(prog)(prog.name, prog.inputs, prog.params, prog.consts, merged, prog.outputs),
                      inputs, g.weights)
    for a, b in zip(want, got, strict=True):
        torch.testing.assert_close(b, a, atol=1e-5, rtol=1e-5)


def test_a_reader_between_the_two_kernels_moves_the_larger_up_unless_it_reads_a_value_written_between(lifted):
    _, _, prog = _program(lifted)
    var = next(k for k in prog.kernels() if k.out.name == "var_mean")
    mean = next(k for k in prog.kernels() if k.out.name == "var_mean_1")
    reader = Kernel("reader", "pointwise", var.out.__class__("r", mean.out.shape, "f32"), mean.coords,
                    Load(mean.out, mean.coords))
    # the variance reads only the input: it moves to the mean's place, ahead of the mean's reader
    (one, after) = merge_siblings([mean, reader, var])
    assert after.name == "reader" and [b.name for b in one.outs()] == ["var_mean", "var_mean_1"]
    # a step between them writes what the variance reads: the two stay apart, in their order
    (x,) = var.inputs()
    writer = Kernel("writer", "pointwise", x, mean.coords, Load(mean.out, mean.coords))
    assert [s.name for s in merge_siblings([mean, reader, writer, var])] == [mean.name, "reader", "writer", var.name]
    (one,) = merge_siblings([var, mean])  # after it: the mean is stored where the variance computes it
    assert [b.name for b in one.outs()] == ["var_mean", "var_mean_1"]
    (one,) = merge_siblings([mean, var])
    assert [b.name for b in one.outs()] == ["var_mean", "var_mean_1"]


SIBLING_DSLS = [d for d in available() if get_backend(d).manifest.capabilities.siblings]
ROWS = ROOT / "tests" / "fixtures" / "siblings_rows.py"


def test_a_row_kernel_stores_the_row_values_the_program_also_returns():
    """The mean a standardisation subtracts, returned too: stored by the row kernel (once per row, at
    the row's place in its keepdim buffer); the reduce kernel that computed it alone is gone."""
    t = build(ROWS, "cpp", "cpu")
    rows = [k for k in t.program.kernels() if k.kind == "rownorm"]
    assert [[b.name for b in k.outs()] for k in rows] == [["mul", "std_mean_1"], ["mul_1", "var_mean_1"]]
    assert all(k.kind != "reduce" for k in t.program.kernels())
    src = render(t)
    assert "std_mean_1[" in src and "var_mean_1[" in src


@pytest.mark.parametrize("dsl", SIBLING_DSLS)
def test_row_siblings_verify_in_every_dsl(dsl, tmp_path):
    target = {"cpp": "cpu", "metal": "m4-max"}.get(dsl, "h100")
    t = translate(ROWS, dsl, target, tmp_path / "m.py", timing=False, seeds=(0, 1))
    assert sum(len(k.also) for k in t.program.kernels()) == 2
    if t.verdict is None:  # no device here: compiled for it, not run
        assert t.compiled.startswith("compiled with") and t.compiled.endswith("not run"), t.compiled
    else:
        assert t.verdict.accepted, t.verdict.line()


@pytest.mark.parametrize("dsl", SIBLING_DSLS)
def test_a_written_module_stores_siblings_from_one_kernel_and_verifies(dsl, tmp_path):
    target = {"cpp": "cpu", "metal": "m4-max"}.get(dsl, "h100")
    t = build(FIXTURE, dsl, target)
    assert sum(len(k.also) for k in t.program.kernels()) == 3
    src = render(t)
    assert src.count("var_mean_1") >= 2  # allocated and written by the variance's kernel
    assert "k0_var_mean: generated reduce kernel" in src and "also stores var_mean_1" in src
    t = translate(FIXTURE, dsl, target, tmp_path / "m.py", timing=False, seeds=(0, 1))
    if t.verdict is None:  # no device here: compiled for it, not run (the GPU test below runs it)
        assert t.compiled.startswith("compiled with") and t.compiled.endswith("not run"), t.compiled
    else:
        assert t.verdict.accepted, t.verdict.line()


VAR_MEAN = """import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.var_mean(x, dim=-1)


def get_inputs():
    return [torch.randn(16, 128)]


def get_init_inputs():
    return []
"""


def test_a_backend_says_where_its_templates_store_siblings(tmp_path):
    """Pallas' GPU kernels store them; its TPU kernels (one output per pallas_call) keep two kernels."""
    prob = tmp_path / "var_mean.py"
    prob.write_text(VAR_MEAN)
    assert sum(len(k.also) for k in build(prob, "pallas", "h100").program.kernels()) == 1
    assert not any(k.also for k in build(prob, "pallas", "tpu-v5p").program.kernels())


@pytest.mark.gpu
@pytest.mark.parametrize("dsl", [d for d in SIBLING_DSLS if d in ("triton", "cuda-c", "tilelang", "pallas")])
def test_siblings_verify_on_the_gpu(dsl, tmp_path):
    for fixture in (FIXTURE, ROWS):
        t = translate(fixture, dsl, "h100", tmp_path / fixture.name, timing=False, seeds=(0, 1))
        assert t.executor == "native" and t.verdict.accepted, t.verdict.line()
