"""In-place epilogues (`ir.kernel.inplace`): a pointwise kernel stores over a dead intermediate it reads
at its own coordinates (a library GEMM's or convolution's output), never over an input, a parameter, a
buffer read later, or one it reads elsewhere; the module's results and its caller's inputs stay as
eager's."""

from __future__ import annotations

import importlib.util
import textwrap
from pathlib import Path

import torch

from akg_agent.translate import build, render
from ir.kernel.inplace import in_place_program
from ir.kernel.ir import Buf, Kernel, KernelProgram, LibraryCall, Load, Op, Var

from .helpers import assert_source_verifies

HEAD = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n\n"


def _problem(tmp_path: Path, init: str, forward: str, inputs: str) -> Path:
    p = tmp_path / "prob.py"
    p.write_text(HEAD + textwrap.dedent(f"""\
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                {init}

            def forward(self, x):
                {forward}


        def get_inputs():
            return [{inputs}]


        def get_init_inputs():
            return []
        """))
    return p


def _load(path: Path, source: str):
    cand = path.parent / "cand_module.py"
    cand.write_text(source)
    spec = importlib.util.spec_from_file_location("cand_module", cand)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


def _places(t) -> dict[str, str]:
    return {k.name: k.in_place for k in t.program.kernels()}


def test_a_convolution_epilogue_stores_over_the_convolution_output(tmp_path):
    path = _problem(tmp_path, "self.conv = nn.Conv2d(3, 8, 3, padding=1); self.b = nn.Parameter(torch.randn(8, 1, 1))",
                    "return torch.relu(self.conv(x)) + self.b", "torch.randn(2, 3, 9, 10)")
    t = build(path, "cpp", "cpu", tuned=False)
    (epilogue,) = t.program.kernels()
    conv = next(s for s in t.program.library_calls() if s.op == "conv")
    assert epilogue.in_place == conv.out.name
    src = render(t)
    assert f"stores over {conv.out.name} in place" in src and f"{epilogue.out.name} = {conv.out.name}\n" in src
    assert f"const float*  {conv.out.name}" in src  # no __restrict__ on the two names of one array
    assert_source_verifies(path, src, tmp_path)


def test_inputs_parameters_and_buffers_read_later_are_never_overwritten(tmp_path):
    """relu(x) reads an input; relu(a) feeds a GEMM while `a` is read again by the last add; the last add
    may store over the second GEMM's output (dead after it). The caller's input is unchanged."""
    path = _problem(tmp_path, "self.l1 = nn.Linear(16, 16); self.l2 = nn.Linear(16, 16)",
                    "a = self.l1(torch.relu(x) * 2.0); return self.l2(torch.relu(a)) + a",
                    "torch.randn(6, 16)")
    t = build(path, "cpp", "cpu", tuned=False, library=("gemm",))
    first, relu_a, last = t.program.kernels()
    gemms = [s.out.name for s in t.program.library_calls()]
    assert first.in_place == "" and relu_a.in_place == "" and last.in_place == gemms[1]
    src = render(t)
    assert_source_verifies(path, src, tmp_path)
    m = _load(path, src)
    x = torch.randn(6, 16)
    keep = x.clone()
    m.ModelNew()(x)
    assert torch.equal(x, keep)


def test_an_operand_also_read_at_other_coordinates_keeps_a_fresh_output(tmp_path):
    path = _problem(tmp_path, "self.w = nn.Parameter(torch.randn(12, 12))",
                    "a = x @ self.w; return torch.relu(a) + a.t()", "torch.randn(12, 12)")
    t = build(path, "cpp", "cpu", tuned=False, library=("gemm",))
    assert set(_places(t).values()) == {""}
    assert_source_verifies(path, render(t), tmp_path)


def test_only_storage_forward_owns_is_taken():
    """A view (or an opaque call, which may return its operand) is not storage of forward's own."""
    x, y = Buf("x", (4, 5), "f32", "input"), Buf("y", (4, 5), "f32")
    i, j = Var("i", 4), Var("j", 5)
    out = Buf("o", (4, 5), "f32", "output")
    k = Kernel("k", "pointwise", out, (i, j), Op("relu", (Load(y, (i, j)),), (), "f32"))

    def marked(op: str) -> str:
        prog = KernelProgram("p", [x], [], {}, [LibraryCall("c", op, (x,), {}, y), k], [out])
        return in_place_program(prog).kernels()[0].in_place

    assert marked("conv") == "y" and marked("permute") == "" and marked("opaque") == ""
    # y viewed by a reshape before the kernel, the view read after it: y's storage is not dead
    v, o2 = Buf("v", (20,), "f32"), Buf("o2", (20,), "f32", "output")
    t = Var("t", 20)
    prog = KernelProgram("p", [x], [], {}, [LibraryCall("c", "conv", (x,), {}, y),
                                            LibraryCall("r", "reshape", (y,), {}, v), k,
                                            Kernel("k2", "pointwise", o2, (t,), Load(v, (t,)))], [out, o2])
    assert in_place_program(prog).kernels()[0].in_place == ""


def test_a_row_kernel_after_a_gemm_stores_over_it_and_never_over_the_residual(tmp_path):
    """linear -> + x (an input) -> layer norm -> relu: the residual add joins the row kernel (the GEMM's
    epilogue, `rows._library_epilogue`), which stores over the GEMM's output (its reductions read a row
    before its sweep writes it), never over the input."""
    path = _problem(tmp_path, "self.l = nn.Linear(32, 32); self.n = nn.LayerNorm(32)",
                    "return torch.relu(self.n(self.l(x) + x))", "torch.randn(8, 32)")
    t = build(path, "cpp", "cpu", tuned=False, library=("gemm",))
    (row,) = t.program.kernels()
    (gemm,) = t.program.library_calls()
    assert row.kind == "rownorm" and row.in_place == gemm.out.name
    src = render(t)
    assert_source_verifies(path, src, tmp_path)
    x = torch.randn(8, 32)
    keep = x.clone()
    _load(path, src).ModelNew()(x)
    assert torch.equal(x, keep)


def test_a_softmax_after_a_gemm_stores_over_it(tmp_path):
    """The row kernel that keeps a softmax's terms (exp(x - max), computed once a row) reads the whole
    row before writing it."""
    path = _problem(tmp_path, "self.l = nn.Linear(40, 72)", "return torch.softmax(self.l(x), -1) * 3.0",
                    "torch.randn(9, 40)")
    t = build(path, "cpp", "cpu", tuned=False, library=("gemm",))
    (row,) = t.program.kernels()
    assert row.kind == "rownorm" and row.in_place == t.program.library_calls()[0].out.name
    src = render(t)
    assert "akg_t[" in src  # the kept terms
    assert_source_verifies(path, src, tmp_path)


def test_a_gemm_output_viewed_before_its_epilogue_keeps_its_storage(tmp_path):
    """qkv = linear(x); q, k, v = views of qkv; g = gelu(qkv); attention(q, k, v): the views are made before
    the GELU kernel and read after it, so the GELU never stores over qkv (it did, and the attention read
    GELU's values)."""
    path = _problem(tmp_path, "self.qkv = nn.Linear(32, 96)",
                    "qkv = self.qkv(x); q, k, v = qkv.reshape(2, 8, 3, 4, 8).permute(2, 0, 3, 1, 4); "
                    "g = F.gelu(qkv); return g, F.scaled_dot_product_attention(q, k, v)", "torch.randn(2, 8, 32)")
    t = build(path, "cpp", "cpu", tuned=False, library=("gemm", "attention"))
    assert [k.in_place for k in t.program.kernels()] == [""]
    assert_source_verifies(path, render(t), tmp_path)
