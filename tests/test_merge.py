"""Pointwise kernels of one shape merged into one kernel with several outputs (ir.kernel.merge): which
merge (a later kernel reading the earlier one's outputs at its own coordinates, or not at all), which do
not (a transposed read, a step in between reading the outputs), which outputs are still stored, and
translated modules that verify (C++ natively, Triton through its interpreter)."""

from __future__ import annotations

import pytest

from akg_agent.translate import build, translate
from ir.kernel.ir import Buf, Kernel, LibraryCall, Load, Op, Var
from ir.kernel.merge import merge_pointwise

X = Buf("x", (4, 8), "f32", "input")


def _k(name: str, src: Buf, op: str = "exp", transposed: bool = False, extents: tuple[int, int] = (4, 8)) -> Kernel:
    i, j = Var(f"{name}_i", extents[0]), Var(f"{name}_j", extents[1])
    load = Load(src, (j, i) if transposed else (i, j))
    return Kernel(name, "pointwise", Buf(f"{name}_out", extents, "f32"), (i, j), Op(op, (load,), (), "f32"))


def test_a_chain_of_pointwise_kernels_is_one_kernel():
    a = _k("a", X)
    b = _k("b", a.out, "tanh")
    c = _k("c", b.out, "neg")
    (one,) = merge_pointwise([a, b, c], {c.out.name})
    assert one.name == "c" and one.also == () and one.inputs() == [X]  # a and b computed in registers
    (kept,) = merge_pointwise([a, b, c], {c.out.name, a.out.name})  # a's output read by the program
    assert [buf.name for buf, _ in kept.also] == ["a_out"]


def test_what_is_not_merged():
    a = _k("a", X)
    assert len(merge_pointwise([a, _k("b", a.out, transposed=True, extents=(8, 4))], set())) == 2
    lib = LibraryCall("lib", "opaque", (a.out,), {}, Buf("l", (4, 8), "f32"))
    steps = merge_pointwise([a, lib, _k("b", a.out)], set())
    assert [s.name for s in steps] == ["a", "lib", "b"]  # a torch call in between reads a's output


def test_an_independent_kernel_moves_past_steps_that_leave_it_alone():
    a, other = _k("a", X), Buf("y", (4, 8), "f32", "input")
    lib = LibraryCall("lib", "opaque", (other,), {}, Buf("l", (4, 8), "f32"))
    steps = merge_pointwise([a, lib, _k("b", lib.out)], {"a_out", "b_out"})
    assert [s.name for s in steps] == ["lib", "b"] and [buf.name for buf, _ in steps[1].also] == ["a_out"]


GRU = """import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.cell = nn.GRUCell(32, 32)

    def forward(self, xs, h):
        outs = []
        for t in range(xs.shape[1]):
            h = self.cell(xs[:, t], h)
            outs.append(h)
        return torch.stack(outs, 1)


def get_inputs():
    return [torch.randn(4, 6, 32), torch.randn(4, 32)]


def get_init_inputs():
    return []
"""


@pytest.mark.parametrize("dsl,target", [("cpp", "cpu"), ("triton", "h100")])
def test_a_recurrence_merges_its_gates_and_verifies(dsl, target, tmp_path):
    p = tmp_path / "gru.py"
    p.write_text(GRU)
    t = build(p, dsl, target)
    pointwise = [k for k in t.program.kernels() if k.kind == "pointwise"]
    assert len(pointwise) <= 8  # a step's gates, candidate and blend: one kernel (six steps, and the stack)
    t = translate(p, dsl, target, tmp_path / "m.py", timing=False, seeds=(0, 1))
    assert t.verdict.accepted, t.verdict.line()
