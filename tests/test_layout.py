"""K-major B for split-precision GEMMs (ir.passes.layout): an fp32 matmul becomes a linear over B
transposed once, a B that is already a transpose is read through, and only backends that ask for it
on targets with TF32 tensor cores get the rewrite; the translated module verifies."""

from __future__ import annotations

import pytest
import torch

from akg_agent.strategy import Strategy
from akg_agent.translate import build, pipeline_for, translate
from dsl_backends import get_backend
from hardware_models.spec import load_target
from ir import run
from ir.graph import Graph
from ir.passes import run_passes
from ir.types import TensorType


def _mm(m: int, k: int, n: int, dtype: str = "f32", transposed: bool = False) -> Graph:
    g = Graph("g")
    a = g.input("a", TensorType((m, k), dtype))
    b = g.input("b", TensorType((n, k) if transposed else (k, n), dtype))
    if transposed:
        b = g.add("permute", [b], {"dims": [1, 0]})
    g.outputs = [g.add("matmul", [a, b])]
    return g


def _ops(g: Graph) -> list[str]:
    return [n.op for n in g.nodes if n.op != "input"]


def test_a_matmul_reads_its_b_transposed_once_and_keeps_its_value():
    g = _mm(256, 160, 136)
    a, b = torch.randn(256, 160, dtype=torch.float32), torch.randn(160, 136, dtype=torch.float32)
    want = run(g, [a, b])[0]
    run_passes(g, "kmajor")
    assert _ops(g) == ["permute", "linear"]
    torch.testing.assert_close(run(g, [a, b])[0], want)


def test_an_unaligned_k_is_padded_with_zeros_in_both_operands():
    g = _mm(260, 147, 136)  # K = 147: rows of 588 bytes, off 16-byte boundaries
    a, b = torch.randn(260, 147, dtype=torch.float32), torch.randn(147, 136, dtype=torch.float32)
    want = run(g, [a, b])[0]
    run_passes(g, "kmajor")
    lin = g.outputs[0]
    assert lin.op == "linear" and [x.op for x in lin.args] == ["pad", "pad"]
    assert [x.type.shape for x in lin.args] == [(260, 160), (136, 160)]
    torch.testing.assert_close(run(g, [a, b])[0], want)


def test_a_transposed_b_is_read_through_without_a_copy():
    g = _mm(512, 128, 128, transposed=True)
    run_passes(g, "kmajor")
    assert _ops(g) == ["linear"] and g.outputs[0].args[1].op == "input"


def _bmm() -> Graph:
    g = Graph("b")
    a = g.input("a", TensorType((2, 256, 160), "f32"))
    b = g.input("b", TensorType((2, 160, 136), "f32"))
    g.outputs = [g.add("matmul", [a, b])]
    return g


def test_a_batched_b_keeps_its_layout():
    g = _bmm()
    run_passes(g, "kmajor")
    assert _ops(g) == ["matmul"]


def test_a_3d_a_over_a_2d_b_reads_b_k_major():
    g = Graph("t")
    a, b = g.input("a", TensorType((4, 64, 160), "f32")), g.input("b", TensorType((160, 136), "f32"))
    g.outputs = [g.add("matmul", [a, b])]
    x, w = torch.randn(4, 64, 160), torch.randn(160, 136)
    want = run(g, [x, w])[0]
    run_passes(g, "kmajor")
    assert _ops(g) == ["permute", "linear"]
    torch.testing.assert_close(run(g, [x, w])[0], want)


@pytest.mark.parametrize("why,g", [("few rows", _mm(64, 512, 512)), ("bf16", _mm(512, 256, 256, "bf16")),
                                   ("shallow K", _mm(4096, 32, 4096)), ("narrow N", _mm(4096, 4096, 64))])
def test_what_keeps_its_layout(why, g):
    run_passes(g, "kmajor")
    assert _ops(g) == ["matmul"], why


def test_only_backends_that_ask_on_targets_with_tf32_tensor_cores():
    assert get_backend("triton").manifest.capabilities.gemm_b_k_major and \
        not get_backend("cuda-c").manifest.capabilities.gemm_b_k_major
    assert load_target("h100").peak("tensor", "tf32") and not load_target("cpu").peak("tensor", "tf32")
    assert ",kmajor," in str(pipeline_for(get_backend("triton"), load_target("h100")))
    # after the library marks: a GEMM left to cuBLAS (which takes either layout) keeps its B
    spec = str(pipeline_for(get_backend("triton"), load_target("h100"), Strategy(library=("gemm",))))
    assert spec.index(",library") < spec.index(",kmajor,")
    g = _mm(512, 256, 256)
    run_passes(g, spec.split(",fuse")[0])
    assert _ops(g) == ["matmul"] and g.nodes[-1].meta.get("library")


MM = """import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, a, b):
        return torch.relu(a @ b)


def get_inputs():
    return [torch.randn(256, 128), torch.randn(128, 160)]


def get_init_inputs():
    return []
"""


MM3 = MM.replace("torch.relu(a @ b)", "torch.matmul(a, b) * 2").replace(
    "[torch.randn(256, 128), torch.randn(128, 160)]", "[torch.randn(2, 128, 132), torch.randn(132, 144)]")


@pytest.mark.parametrize("src", [MM, MM3], ids=["2d", "3d-a-unaligned-k"])
def test_the_translated_gemm_reads_k_major_b_and_verifies(src, tmp_path):
    p = tmp_path / "mm.py"
    p.write_text(src)
    assert not any(n.op == "linear" for n in build(p, "cuda-c", "h100").graph.nodes)  # not asked for
    t = translate(p, "triton", "h100", tmp_path / "m.py", timing=False, seeds=(0, 1))
    assert any(n.op == "linear" for n in t.graph.nodes)
    assert t.verdict.accepted, t.verdict.line()


GN = """import torch
import torch.nn as nn


class Model(nn.Module):  # a group norm over flat groups (nn.GroupNorm is one row kernel per group)
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.rand(16) + 0.5)

    def forward(self, x):
        g = x.reshape(3, 4, 256)
        y = (g - g.mean(-1, keepdim=True)) * torch.rsqrt(g.var(-1, unbiased=False, keepdim=True) + 1e-5)
        return y.reshape(3, 16, 8, 8) * self.w[:, None, None]


def get_inputs():
    return [torch.randn(3, 16, 8, 8)]


def get_init_inputs():
    return []
"""


def test_a_view_of_an_input_read_by_several_kernels_is_not_stored(tmp_path):
    """A group norm's [N, G, C/G*H*W] view of x feeds its statistics and output kernels: each reads x
    through its own index (no kernel copies the view), and the module verifies."""
    p = tmp_path / "gn.py"
    p.write_text(GN)
    t = build(p, "cpp", "cpu")
    assert all(not (len(grp.nodes) == 1 and grp.nodes[0].op == "reshape") for grp in t.plan.groups), str(t.plan)
    assert "used 3 times" not in str(t.plan)
    g = _mm(512, 256, 256)
    x = g.inputs[0]
    v = g.add("reshape", [x], {"shape": [256, 512]})
    g.outputs = [g.outputs[0], g.add("sum", [v], {"dims": [1]}), g.add("amax", [v], {"dims": [0]})]
    run_passes(g, "views")
    assert [n.op for n in g.nodes].count("reshape") == 2  # one each for the two reductions
    t = translate(p, "cpp", "cpu", tmp_path / "m.py", timing=False, seeds=(0, 1))
    assert t.verdict.accepted, t.verdict.line()


STEPS = """import torch
import torch.nn as nn


class Model(nn.Module):
    \"\"\"A recurrence's shape: one projection of every time step, each step's slice read by two gates.\"\"\"

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 16)

    def forward(self, x):
        p = self.proj(x) * 2.0  # [B, T, 16], stored once
        h = torch.zeros(x.shape[0], 16)
        for t in range(3):
            s = p[:, t]
            h = torch.sigmoid(s) * h + torch.tanh(s)
        return h


def get_inputs():
    return [torch.randn(2, 3, 8)]


def get_init_inputs():
    return []
"""


def test_a_slice_of_a_stored_value_read_by_several_kernels_is_not_copied(tmp_path):
    """Each step's slice of the projection (`p[:, t]`, a slice then a reshape) feeds two gate kernels:
    found in GRU training graphs as one copy kernel per time step. Each gate reads the projection
    through its own index: no group is a lone slice or reshape, and the module verifies."""
    p = tmp_path / "steps.py"
    p.write_text(STEPS)
    t = build(p, "cpp", "cpu")
    lone = [grp for grp in t.plan.groups if all(n.op in ("slice", "reshape") for n in grp.nodes)]
    assert not lone, str(t.plan)
    t = translate(p, "cpp", "cpu", tmp_path / "m.py", timing=False, seeds=(0, 1))
    assert t.verdict.accepted, t.verdict.line()


GRADS = """import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x, dy, p, v):
        return torch.mm(x.t(), dy), torch.bmm(p.transpose(1, 2), v)  # a weight's gradient; P^T V


def get_inputs():
    return [torch.randn(256, 192).to(DT), torch.randn(256, 96).to(DT), torch.randn(4, 128, 128).to(DT),
            torch.randn(4, 128, 64).to(DT)]


def get_init_inputs():
    return []
"""


@pytest.mark.parametrize("dtype,copies", [("torch.bfloat16", 0), ("torch.float32", 2)])
def test_triton_gemms_read_16_bit_transposes_in_place(dtype, copies, tmp_path):
    """A backward pass's X^T and P^T feed GEMMs: in bf16 the tiles load them transposed (no copy kernel),
    in fp32 they stay copies (32-bit tensor-core tiles want K contiguous); no tile is wider than its
    padded dimension (N = 64 took a 128 x 256 tile)."""
    p = tmp_path / "grads.py"
    p.write_text(GRADS.replace("DT", dtype))
    t = build(p, "triton", "h100")
    kinds = [k.kind for k in t.program.kernels()]
    assert kinds.count("matmul") == 2 and kinds.count("pointwise") == copies, kinds
    bmm = next(k for k in t.program.kernels() if k.kind == "matmul" and k.out.shape == (4, 128, 64))
    assert t.schedules[bmm.name]["BN"] <= 64
