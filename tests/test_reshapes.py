"""Reshapes moved toward the outputs (ir.passes.reshapes): the value is kept (the IR interpreter), a
parameter the moved op reads is viewed in place where that stays a strided read (a group norm's
per-channel weight in its [N, G, C/G, H*W] groups), a computed operand or that weight seen per flat group
stops the move, an output reshape of a computed value becomes a torch view, and a softmax scaled and
reshaped is then one row kernel that verifies (C++ natively, Triton through its interpreter)."""

from __future__ import annotations

import pytest
import torch

from akg_agent.translate import build, translate
from ir import run
from ir.graph import Graph
from ir.lift import lift
from ir.passes import run_passes
from ir.passes.library import LIBRARY_MARK
from ir.problem import load_problem
from ir.types import TensorType

GN = """import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.gn = nn.GroupNorm(4, 16)
        with torch.no_grad():
            self.gn.weight.uniform_(0.5, 2.0)
            self.gn.bias.uniform_(-1.0, 1.0)

    def forward(self, x):
        return self.gn(x)


def get_inputs():
    return [torch.randn(3, 16, 8, 8) * 2 + 1]


def get_init_inputs():
    return []
"""

GN_FLAT = """import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.rand(16) + 0.5)
        self.b = nn.Parameter(torch.rand(16) - 0.5)

    def forward(self, x):
        g = x.reshape(3, 4, 256)
        y = (g - g.mean(-1, keepdim=True)) * torch.rsqrt(g.var(-1, unbiased=False, keepdim=True) + 1e-5)
        return y.reshape(3, 16, 8, 8) * self.w[:, None, None] + self.b[:, None, None]


def get_inputs():
    return [torch.randn(3, 16, 8, 8) * 2 + 1]


def get_init_inputs():
    return []
"""

SOFTMAX = """import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.rand(2048) + 0.5)

    def forward(self, x):
        return (torch.softmax(x.reshape(4, 8, 256), -1) * 2.0).reshape(4, 2048) * self.w


def get_inputs():
    return [torch.randn(4, 2048)]


def get_init_inputs():
    return []
"""


def _problem(tmp_path, src: str, name: str):
    p = tmp_path / f"{name}.py"
    p.write_text(src)
    return p


@pytest.mark.parametrize("src,name", [(SOFTMAX, "softmax"), (GN, "gn"), (GN_FLAT, "gn_flat")])
def test_the_value_is_kept_and_the_output_is_a_view_where_the_move_reads_in_place(src, name, tmp_path):
    prob = load_problem(_problem(tmp_path, src, name))
    g = lift(prob)
    run_passes(g, "simplify,decompose,simplify")
    x = prob.make_inputs(0, device=torch.device("cpu"))[0].double()
    want = run(g, [x])[0]
    run_passes(g, "sinkreshapes")
    out = g.outputs[0]
    if name == "softmax":  # the scale and the per-column weight (w[h * 256 + t], strided) now in [4, 8, 256]
        assert out.op == "reshape" and out.meta.get(LIBRARY_MARK) and out.args[0].type.shape == (4, 8, 256)
    elif name == "gn":  # nn.GroupNorm's groups are [N, G, C/G, H*W]: its weight is w[g * 4 + c] there
        assert out.op == "reshape" and out.meta.get(LIBRARY_MARK) and out.args[0].type.shape == (3, 4, 4, 64)
    else:  # over flat groups w[(g * 256 + j) // 64] is no strided read: the affine stays after the reshape
        assert out.op == "add" and not any(n.meta.get(LIBRARY_MARK) for n in g.nodes)
    torch.testing.assert_close(run(g, [x])[0], want)


def test_a_computed_operand_stops_the_move():
    g = Graph("g")
    x = g.input("x", TensorType((4, 6), "f32"))
    y = g.input("y", TensorType((2, 12), "f32"))
    e = g.add("exp", [x])
    g.outputs = [g.add("add", [g.add("reshape", [e], {"shape": [2, 12]}), g.add("exp", [y])])]
    run_passes(g, "sinkreshapes")
    assert g.outputs[0].op == "add"


@pytest.mark.parametrize("pure", [False, True], ids=["hybrid", "pure"])
def test_one_row_kernel_and_a_view(pure, tmp_path):
    """The view is no library computation: --pure keeps it (it refused the program before)."""
    t = build(_problem(tmp_path, SOFTMAX, "softmax"), "cpp", "cpu", pure=pure)
    assert [k.kind for k in t.program.kernels()] == ["rownorm"]
    assert [s.op for s in t.program.library_calls()] == ["reshape"]


@pytest.mark.parametrize("dsl,target", [("cpp", "cpu"), ("triton", "h100")])
@pytest.mark.parametrize("src,name", [(GN, "gn"), (SOFTMAX, "softmax")])
def test_moved_reshapes_verify(src, name, dsl, target, tmp_path):
    t = translate(_problem(tmp_path, src, name), dsl, target, tmp_path / "m.py", timing=False, seeds=(0, 1))
    assert t.verdict.accepted, t.verdict.line()
