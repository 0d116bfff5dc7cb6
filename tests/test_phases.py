"""Strided transposed convolutions as one convolution per output phase (`ir.passes.phases`): the same
values as the interpreter's transposed convolution in 1, 2 and 3 spatial axes (strides, paddings and
output paddings that leave phases of unequal length and crop or pad the input), and a pure C++ plan
that generates them verifies."""

from __future__ import annotations

import pytest
import torch

from akg_agent.agents.designer import rules_plan
from akg_agent.translate import build, render
from ir import run
from ir.graph import Graph
from ir.passes import run_passes
from ir.types import TensorType

from .helpers import assert_source_verifies


@pytest.mark.parametrize(("x", "w", "attrs"), [
    ((2, 5, 8, 9), (5, 3, 4, 4), {"stride": [2, 2], "padding": [1, 1], "output_padding": [0, 0]}),
    ((1, 3, 7, 6), (3, 4, 3, 5), {"stride": [2, 3], "padding": [0, 2], "output_padding": [1, 2]}),
    ((2, 4, 5), (4, 6, 5), {"stride": [3], "padding": [1], "output_padding": [2]}),
    ((1, 2, 3, 4, 5), (2, 3, 2, 3, 4), {"stride": [2, 2, 3], "padding": [0, 1, 1], "output_padding": [1, 0, 2]}),
], ids=["2d-k4-s2", "2d-uneven", "1d-s3", "3d"])
def test_each_phase_is_a_convolution_and_the_whole_keeps_the_meaning(x, w, attrs):
    rank = len(attrs["stride"])
    g = Graph("g")
    xs, ws, b = g.input("x", TensorType(x, "f32")), g.input("w", TensorType(w, "f32")), \
        g.input("b", TensorType((w[1],), "f32"))
    g.outputs = [g.add("conv_transpose", [xs, ws, b], dict(attrs, dilation=[1] * rank))]
    args = [torch.randn(x), torch.randn(w), torch.randn(w[1])]
    want = run(g, args)[0]
    run_passes(g, "tphases,simplify")
    ops = [n.op for n in g.nodes]
    phases = 1
    for s in attrs["stride"]:
        phases *= s
    assert "conv_transpose" not in ops and ops.count("conv") == phases
    assert all(n.attrs["stride"] == (1,) * rank for n in g.nodes if n.op == "conv")
    torch.testing.assert_close(run(g, args)[0], want, atol=1e-5, rtol=1e-5)


def test_grouped_dilated_or_unstrided_ones_are_left_alone():
    for attrs in ({"groups": 2}, {"dilation": [2, 2]}, {"stride": [1, 1]}):
        g = Graph("g")
        x, w = g.input("x", TensorType((1, 4, 6, 6), "f32")), g.input("w", TensorType((4, 2, 3, 3), "f32"))
        at = {"stride": [2, 2], "padding": [1, 1], "output_padding": [0, 0], "dilation": [1, 1], **attrs}
        g.outputs = [g.add("conv_transpose", [x, w], at)]
        run_passes(g, "tphases")
        assert [n.op for n in g.nodes if n.op != "input"] == ["conv_transpose"]


UPSAMPLE = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.up = nn.ConvTranspose2d(6, 5, 4, stride=2, padding=1)

    def forward(self, x):
        return torch.relu(self.up(x))


def get_inputs():
    return [torch.randn(2, 6, 7, 9)]


def get_init_inputs():
    return []
'''


def test_a_pure_plan_generates_each_phase_and_verifies(tmp_path, monkeypatch):
    monkeypatch.setenv("AKG_CACHE_DIR", str(tmp_path))
    path = tmp_path / "p.py"
    path.write_text(UPSAMPLE)
    hybrid = build(path, "cpp", "cpu", tuned=False)
    assert "one implicit GEMM per output phase" in rules_plan(hybrid, 0.5).groups[0].why
    t = build(path, "cpp", "cpu", tuned=False, pure=True)
    assert not t.program.library_calls()
    assert [k.kind for k in t.program.kernels()].count("matmul") == 4  # one implicit GEMM per phase
    assert_source_verifies(path, render(t), tmp_path, (0, 1))
