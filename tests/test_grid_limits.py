"""Launch grids within CUDA's limits (y and z at most 65535): a GEMM whose batch or row tiles pass them
folds its grid into x, each block decoding its tile. Checked statically at a batch of 70000, and the
folded code run here at a small size (the limit lowered through the schedule) wherever an executor is."""

from __future__ import annotations

import re

import pytest
import torch

import akg_agent.translate as tr
from dsl_backends.cuda_c.backend import dims
from dsl_backends.exprs import MAX_GRID_YZ

from .conftest import problem_path

BIG_BATCH = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, a, b):
        return torch.relu(torch.bmm(a, b))


def get_inputs():
    return [torch.randn(70000, 4, 8), torch.randn(70000, 8, 4)]


def get_init_inputs():
    return []
'''


@pytest.fixture
def big(tmp_path):
    p = tmp_path / "bmm_70000.py"
    p.write_text(BIG_BATCH)
    return p


def _grid_of(source: str, kernel: str) -> tuple[int, ...]:
    """The launch grid written for `kernel` (Triton and Pallas grids are Python expressions)."""
    m = re.search(rf"{kernel}\[(\(.*?\))\]", source) or re.search(rf"_akg_launch\({kernel}, (\(.*?\))", source)
    assert m, f"no launch of {kernel}"
    return eval(m.group(1), {"triton": type("T", (), {"cdiv": staticmethod(lambda a, b: -(-a // b))})})


@pytest.mark.parametrize("dsl", ["triton", "pallas"])
def test_a_batch_past_the_limit_folds_into_the_first_axis(dsl, big):
    t = tr.build(big, dsl, "h100")
    (k,) = t.program.kernels()
    grid = _grid_of(tr.render(t), k.name)
    assert len(grid) == 1 and grid[0] >= 70000 and grid[0] < 2**31


def test_cuda_c_and_tilelang_grids_stay_within_the_limits(big):
    t = tr.build(big, "cuda-c", "h100")
    (k,) = t.program.kernels()
    (gx, gy, gz), _ = dims(k, t.schedules[k.name])
    assert gx >= 70000 and gy <= MAX_GRID_YZ and gz <= MAX_GRID_YZ
    t = tr.build(big, "tilelang", "h100")
    src = tr.render(t)
    assert re.search(r"T\.Kernel\(\d+, threads=THREADS\) as bt:", src)


def _lower_limit(monkeypatch):
    real = tr.choose_schedule

    def low(backend, k, grp, target):
        s = real(backend, k, grp, target)
        return s.replace(MAX_GRID_YZ=1) if k.kind == "matmul" else s
    monkeypatch.setattr(tr, "choose_schedule", low)


@pytest.mark.parametrize("dsl", ["triton", "pallas", "cuda-c"])
def test_the_folded_grid_computes_the_same_values(dsl, monkeypatch):
    """mm_batched (4 GEMMs of 32 x 48 x 16) with the limit at 1: every batch and row tile folds into x.
    (TileLang's folded kernel runs on the GPU test below; its C target here takes long to build.)"""
    _lower_limit(monkeypatch)
    t = tr.translate(problem_path("mm_batched"), dsl, "h100", timing=False, seeds=(0,))
    assert "MAX_GRID_YZ=1" in t.source
    if t.executor == "compile-only":
        assert t.compiled  # nvcc built it; the GPU test below runs it
    else:
        assert t.verdict.accepted


@pytest.mark.gpu
@pytest.mark.parametrize("dsl", ["triton", "cuda-c", "tilelang"])
def test_a_batch_of_70000_runs_on_the_gpu(dsl, big):
    t = tr.translate(big, dsl, "h100", timing=False, seeds=(0,))
    assert t.verdict.accepted, t.verdict.reason
    assert torch.cuda.is_available()
