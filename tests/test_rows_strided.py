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


COLUMNS = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x.sum(1), x.amax(1), x.amin(1)


def get_inputs():
    return [torch.randn(160, 200, 24).to(torch.{dtype})]


def get_init_inputs():
    return []
'''


def test_a_strided_reduction_keeps_a_tile_accumulator_in_triton(tmp_path):
    """A column sum folded across its tile every step put a cross-warp reduction in each iteration (a bf16
    sum over dim 0 of [1024]^3 on the H200: 744 us against 542 with a tile accumulator folded once, torch's
    515): the sweep accumulates [BM, BR] and folds after it, and keeps each reduction's value (200 strided
    rows in chunks, a masked tail)."""
    from .helpers import assert_source_verifies

    for dtype in ("float32", "bfloat16"):
        p = tmp_path / f"columns_{dtype}.py"
        p.write_text(COLUMNS.replace("{dtype}", dtype))
        src = render(build(p, "triton", "h100", tuned=False))
        assert src.count("tl.full([BM, BR]") == 3 and "tl.sum(acc0, axis=1, keep_dims=True)" in src
        assert "tl.max(acc0, axis=1, keep_dims=True)" in src and "tl.min(acc0, axis=1, keep_dims=True)" in src
        assert_source_verifies(p, src, tmp_path)
