"""A pointwise kernel that writes a transpose of what it reads (RoPE writing keys [B, H, D, S]) is a [y, x]
tile in Triton, so it loads along y and stores along x; a broadcast along a non-inner axis (a bias over
channels) keeps the flat block. Verified through Triton's interpreter."""

from __future__ import annotations

import pytest

from akg_agent.translate import translate

ROPE = """
    def forward(self, q, cos, sin):
        r = torch.cat([-q[..., 32:], q[..., :32]], dim=-1)
        return (q * cos + r * sin).permute(0, 2, 3, 1).contiguous() * 1.5


def get_inputs():
    return [torch.randn(2, 96, 4, 64).bfloat16(), torch.randn(96, 1, 64).bfloat16(),
            torch.randn(96, 1, 64).bfloat16()]
"""
BIAS = """
    def forward(self, x, b):
        return torch.relu(x + b[None, :, None, None])


def get_inputs():
    return [torch.randn(2, 64, 12, 40), torch.randn(64)]
"""


@pytest.mark.parametrize("name,body,tiled", [("rope_keys", ROPE, True), ("channel_bias", BIAS, False)])
def test_a_transposing_pointwise_kernel_is_a_2d_tile(tmp_path, name, body, tiled):
    path = tmp_path / f"{name}.py"
    path.write_text("import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):" + body
                    + "\n\ndef get_init_inputs():\n    return []\n")
    out = tmp_path / "out.py"
    t = translate(str(path), "triton", "h100", out, timing=False, seeds=(0, 1))
    assert t.verdict.accepted, t.verdict.line()
    src = out.read_text()
    assert ("YBLOCK: tl.constexpr" in src) is tiled, src
    if tiled:  # the read is contiguous along the tile's rows, the write along its columns
        assert "tl.arange(0, YBLOCK)[:, None]" in src and "tl.store(out_ptr + offs" in src
