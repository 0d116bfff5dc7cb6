"""Triton GEMMs through TMA descriptors (Hopper): which operands qualify, the rendered loads, and the
results through the interpreter here (natively on the H100 where one exists)."""

from __future__ import annotations

import pytest

from akg_agent.translate import build, render
from akg_agent.verifier import verify
from dsl_backends.triton import tma

from .conftest import problem_path


def test_which_operands_take_tma():
    t = build(problem_path("l2_gemm_scale_sigmoid_sum"), "triton", "h100")
    [k] = [k for k in t.program.kernels() if k.kind == "matmul"]
    assert tma.operands(k, 32) == {"x": "a", "p_linear_weight": "b"}
    t = build(problem_path("mm_matvec"), "triton", "h100")
    [k] = [k for k in t.program.kernels() if k.kind == "matmul"]
    assert "b" not in tma.operands(k, 32)  # a [96, 1] vector: 4-byte rows, not a multiple of 16
    t = build(problem_path("mm_batched"), "triton", "h100")
    [k] = [k for k in t.program.kernels() if k.kind == "matmul"]
    assert tma.operands(k, 32) == {}  # batched operands keep pointer loads


@pytest.mark.parametrize("name", ["l2_gemm_scale_sigmoid_sum", "mm_square", "mm_rect_transposed", "gemm_addmm"])
def test_tma_gemms_verify(name, tmp_path):
    t = build(problem_path(name), "triton", "h100")
    ks = [k for k in t.program.kernels() if k.kind == "matmul" and tma.operands(k, 32)]
    assert ks
    for k in ks:
        t.schedules[k.name] = t.schedules[k.name].replace(TMA=True)
    src = render(t)
    assert "tl.make_tensor_descriptor(" in src and "triton.set_allocator(_akg_tma_alloc)" in src
    if name == "l2_gemm_scale_sigmoid_sum":  # nn.Linear's weight is [N, K]: loaded [BN, BK], transposed
        assert "b_desc.load([pn * BN, k0]).T" in src and "a_desc.load([pm * BM, k0])" in src
    cand = tmp_path / "cand.py"
    cand.write_text(src)
    v = verify(problem_path(name), cand, target="h100", seeds=(0, 1))
    assert v.accepted, v.line()


def test_tuner_is_offered_tma_only_where_no_tile_is_transposed():
    from dsl_backends import get_backend

    be = get_backend("triton")
    t = build(problem_path("mm_square"), "triton", "h100")  # [M, K] x [K, N]: no transpose
    [k] = [k for k in t.program.kernels() if k.kind == "matmul"]
    space = be.tuning_space(k, t.target)
    assert any(s.get("TMA") for s in space) and not t.schedules[k.name].get("TMA")  # off by default
    t = build(problem_path("l2_gemm_scale_sigmoid_sum"), "triton", "h100")  # a linear's [N, K] weight
    [k] = [k for k in t.program.kernels() if k.kind == "matmul"]
    assert not any(s.get("TMA") for s in be.tuning_space(k, t.target))
    t = build(problem_path("mm_square"), "triton", "a100")  # no TMA before Hopper
    [k] = [k for k in t.program.kernels() if k.kind == "matmul"]
    assert not any(s.get("TMA") for s in be.tuning_space(k, t.target))
