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
}


def _program(tmp_path, name: str) -> str:
    body, inputs = PROGRAMS[name]
    args = {"gemm_relu": "a, b", "layer_norm_softmax": "a"}.get(name, "a, b, c")
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
