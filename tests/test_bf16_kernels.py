"""bf16 GEMMs and attention written in Triton verify through its interpreter (its bf16 dot is widened
first: the interpreter multiplied the operands' uint16 bits), and in C++; a bf16 softmax and layer norm
written as kernels keep torch's rounding."""

from __future__ import annotations

import pytest

from akg_agent.translate import translate

PROGRAMS = {
    "gemm_relu": ("torch.relu(a @ b)", "[torch.randn(128, 64), torch.randn(64, 96)]"),
    "attention": ("torch.softmax(a @ b.transpose(-1, -2) * 0.125, dim=-1) @ c",
                  "[torch.randn(2, 4, 128, 64) for _ in range(3)]"),
    "sdpa_causal": ("F.scaled_dot_product_attention(a, b, c, is_causal=True)",
                    "[torch.randn(2, 4, 128, 64) for _ in range(3)]"),
    "layer_norm_softmax": ("torch.softmax(F.layer_norm(a, [96]), dim=-1)", "[torch.randn(64, 96)]"),
    # a projection into heads: the GEMM's epilogue stores transposed, its operands read over mo / no
    "projection_heads": ("(a.view(256, 64) @ b).view(2, 128, 4, 24).transpose(1, 2) * 2.0",
                         "[torch.randn(2, 128, 64), torch.randn(64, 96)]"),
}


def _program(tmp_path, name: str) -> str:
    body, inputs = PROGRAMS[name]
    args = {"gemm_relu": "a, b", "projection_heads": "a, b", "layer_norm_softmax": "a"}.get(name, "a, b, c")
    path = tmp_path / f"{name}.py"
    path.write_text(f"""import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def forward(self, {args}):
        return {body}


def get_inputs():
    return [t.bfloat16() for t in {inputs}]


def get_init_inputs():
    return []
""")
    return str(path)


@pytest.mark.parametrize("dsl,target", [("triton", "h100"), ("cpp", "cpu")])
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_bf16_kernels_verify(tmp_path, name, dsl, target):
    t = translate(_program(tmp_path, name), dsl, target, tmp_path / "out.py", timing=False, seeds=(0, 1))
    assert t.verdict.accepted, t.verdict.line()


def test_a_projection_into_heads_reads_its_operands_over_the_tile_rows_and_columns(tmp_path):
    """The GEMM's epilogue stores [B, H, S, D]; its operands' loads are indexed by mo / no, not by the
    output's digits, which hid their contiguity from Triton (Llama's projections ran 8.5x slower on an
    H200)."""
    out = tmp_path / "out.py"
    t = translate(_program(tmp_path, "projection_heads"), "triton", "h100", out, timing=False, seeds=(0,))
    assert t.verdict.accepted, t.verdict.line()
    src = out.read_text()
    assert "tl.store(out_ptr + (c0 * 12288 + c1 * 3072 + c2 * 24 + c3)" in src
    assert "(mo[:, None] % 256) * 64" in src and "(kb * 96) + (no[None, :] % 96)" in src, src
