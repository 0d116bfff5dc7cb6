"""Rows reduced across a strided axis (an RMS norm over the channels of NCHW, KernelBench level 1 #36): the
C++ backend (capability `contiguous_rows`) keeps them as split kernels, which run along the contiguous
axis (its row kernel gathered each row: 7x slower than the split kernels, 0.21x eager, found by a new
user's trial); rows along the contiguous axis stay one row kernel; GPU backends keep row fusion."""

from __future__ import annotations

from akg_agent.translate import build, pipeline_for, render
from akg_agent.verifier import verify
from dsl_backends import get_backend

RMS_CHANNELS = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, num_features: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps

    def forward(self, x):
        rms = torch.sqrt(torch.mean(x ** 2, dim={dim}, keepdim=True) + self.eps)
        return x / rms


def get_inputs():
    return [torch.randn(2, 16, 12, 10)]


def get_init_inputs():
    return [16]
'''


def _problem(tmp_path, dim):
    p = tmp_path / f"rms_dim{dim}.py"
    p.write_text(RMS_CHANNELS.replace("{dim}", str(dim)))
    return p


def test_the_cpp_pipeline_keeps_strided_rows_split():
    assert ",rows{strided=0}" in str(pipeline_for(get_backend("cpp")))
    assert str(pipeline_for(get_backend("triton"))).endswith(",rows,flash")


def test_a_norm_over_channels_is_split_on_the_cpu_and_verifies(tmp_path):
    p = _problem(tmp_path, 1)
    t = build(p, "cpp", "cpu", tuned=False)
    kinds = [k.kind for k in t.program.kernels()]
    assert "rownorm" not in kinds and len(kinds) == 2  # the sums, then the division
    cand = tmp_path / "cand.py"
    cand.write_text(render(t))
    assert verify(p, cand, target="cpu", seeds=(0, 1)).accepted
    # the same norm over the last axis stays one row kernel; Triton fuses the strided one
    assert [k.kind for k in build(_problem(tmp_path, -1), "cpp", "cpu", tuned=False).program.kernels()] == ["rownorm"]
    assert [k.kind for k in build(p, "triton", "h100", tuned=False).program.kernels()] == ["rownorm"]
