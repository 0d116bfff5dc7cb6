"""Triton GEMM schedules where K is short (KernelBench's tall-skinny GEMM, K = 32): the output's stores
decide, so the space holds no padded K step and no stage count that has nothing to overlap, the cost
model's ties go to the tile with the least compute and the widest stores, TMA comes after pointer loads,
and fp32 on the FMA path is never offered with TMA (measured 40-50x slower on the H100)."""

from __future__ import annotations

import akg_agent.translate as tr
from akg_agent.ranking import ranked_space
from dsl_backends import get_backend
from hardware_models.cost import estimate_group
from ir.kernel.schedule import Schedule

from .test_precision import GEMM_FP32

TALL_SKINNY = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, A, B):
        return torch.matmul(A, B)


def get_inputs():
    return [torch.rand(32768, 32), torch.rand(32, 32768)]


def get_init_inputs():
    return []
'''


def _gemm(path):
    t = tr.build(path, "triton", "h100", tuned=False)
    (k,) = [k for k in t.program.kernels() if k.kind == "matmul"]
    return t, k, {g.id: g for g in t.plan.groups}[k.group]


def test_one_k_step_leaves_no_padded_step_and_one_stage_count(tmp_path):
    p = tmp_path / "tall_skinny.py"
    p.write_text(TALL_SKINNY)
    t, k, _ = _gemm(p)
    space = get_backend("triton").tuning_space(k, t.target)
    assert {s["BK"] for s in space} == {32}
    assert {s["num_stages"] for s in space} == {2}
    # a long K keeps both steps and every stage count
    t, k, _ = _gemm(GEMM_FP32)
    space = get_backend("triton").tuning_space(k, t.target)
    assert {s["BK"] for s in space} == {32, 64} and {s["num_stages"] for s in space} == {2, 3, 4}


def test_tma_is_offered_only_off_the_fma_path(tmp_path):
    p = tmp_path / "tall_skinny.py"
    p.write_text(TALL_SKINNY)
    t, k, _ = _gemm(p)
    space = get_backend("triton").tuning_space(k, t.target)
    tma = [s for s in space if s.get("TMA")]
    assert tma and all(s.get("input_precision") == "tf32x3" for s in tma)


def test_memory_bound_ties_go_to_the_widest_tile_with_the_least_compute(tmp_path):
    p = tmp_path / "tall_skinny.py"
    p.write_text(TALL_SKINNY)
    t, k, grp = _gemm(p)
    ranked = ranked_space(get_backend("triton"), k, grp, t.target)
    first = ranked[0]
    # measured on the H100: 2.32-2.36 ms here against 3.1-3.5 for the 32- and 64-row tiles the space's
    # own order put first, and 2.6 for cuBLAS
    assert (first["BM"], first["BN"], first["num_warps"], first.get("input_precision")) == (128, 128, 8, "tf32x3")
    assert t.schedules[k.name] == first  # translate's plan takes it too
    # within each numerics, every TMA schedule after every pointer-load one the model ties with it
    split = [s for s in ranked if s.get("input_precision") == "tf32x3"]
    with_tma = [i for i, s in enumerate(split) if s.get("TMA")]
    assert with_tma and min(with_tma) > 0
    plain = Schedule(**{key: v for key, v in dict(split[min(with_tma)]).items() if key != "TMA"})
    assert split.index(plain) < min(with_tma)


T5_DOWN = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.wo = nn.Linear(2048, 512, bias=False)

    def forward(self, x, h):
        return x + self.wo(h)


def get_inputs():
    return [torch.randn(4096, 512, dtype=torch.bfloat16), torch.randn(4096, 2048, dtype=torch.bfloat16)]


def get_init_inputs():
    return []
'''


def test_memory_bound_tiles_over_a_long_k_pipeline_the_deeper_step(tmp_path):
    # T5's feed-forward output (2048 -> 512 over 4096 tokens, bf16), which the model calls L2-bound: the
    # space's first tie (BK=32, two stages) ran 61 us on the H200, BK=64 over three stages 25
    p = tmp_path / "t5_down.py"
    p.write_text(T5_DOWN)
    t = tr.build(p, "triton", "h200", tuned=False)
    (k,) = [k for k in t.program.kernels() if k.kind == "matmul"]
    grp = {g.id: g for g in t.plan.groups}[k.group]
    first = ranked_space(get_backend("triton"), k, grp, t.target)[0]
    assert estimate_group(grp, t.target, get_backend("triton").tiling(first)).bound in ("l2", "dram")
    assert (first["BK"], first["num_stages"]) == (64, 3) and t.schedules[k.name] == first
