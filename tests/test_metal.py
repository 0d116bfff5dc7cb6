"""The Metal emulator's own semantics: barriers, threadgroup memory, SIMD shuffles, the prelude's group
reductions and math, each checked on a small MSL kernel compiled against the shim and run on the CPU."""

from __future__ import annotations

import ctypes
import math
import subprocess
import sys

import pytest
import torch

from akg_agent.translate import build, render
from dsl_backends.metal.backend import emulate

from .conftest import problem_path

KERNELS = r"""
kernel void rotate(device float* out [[buffer(0)]], uint3 tg [[threadgroup_position_in_grid]],
                   uint3 lid [[thread_position_in_threadgroup]], uint3 tpg [[threads_per_threadgroup]]) {
    AKG_TG float tile[256];
    tile[lid.x] = float(tg.x * 1000 + lid.x);
    threadgroup_barrier(mem_flags::mem_threadgroup);  // without it thread 0 would read an unwritten slot
    out[tg.x * tpg.x + lid.x] = tile[(lid.x + 1) % tpg.x];
}
kernel void shuffle(device float* out [[buffer(0)]], uint3 lid [[thread_position_in_threadgroup]]) {
    out[lid.x] = simd_shuffle_down(float(lid.x), (ushort)3);
}
kernel void reduce(device const float* x [[buffer(0)]], device float* out [[buffer(1)]],
                   device int64_t* idx [[buffer(2)]], uint3 lid [[thread_position_in_threadgroup]],
                   uint3 tpg [[threads_per_threadgroup]]) {
    AKG_TG int64_t smem[32];
    AKG_TG int64_t smem_i[32];
    const float v = x[lid.x];
    out[0] = akg_block_reduce<0>(v, smem, lid.x, tpg.x);
    out[1] = akg_block_reduce<2>(v, smem, lid.x, tpg.x);
    float m = v;
    int64_t i = lid.x;
    akg_block_arg<1>(m, i, smem, smem_i, lid.x, tpg.x);
    if (lid.x == 0) idx[0] = i;
}
kernel void mathfns(device const float* x [[buffer(0)]], device float* out [[buffer(1)]],
                    uint3 lid [[thread_position_in_threadgroup]], uint3 tg [[threadgroup_position_in_grid]],
                    uint3 tpg [[threads_per_threadgroup]]) {
    const uint i = tg.x * tpg.x + lid.x;
    out[3 * i] = akg_erf(x[i]);
    out[3 * i + 1] = akg_log1p(x[i]);
    out[3 * i + 2] = akg_expm1(x[i]);
}
kernel void mma(device const float* a [[buffer(0)]], device const float* b [[buffer(1)]],
                device float* c [[buffer(2)]], uint3 lid [[thread_position_in_threadgroup]]) {
    AKG_TG float as[8 * 16];
    AKG_TG float bs[16 * 8];
    AKG_TG float cs[8 * 8];
    for (uint i = lid.x; i < 128; i += 32) { as[i] = a[i]; bs[i] = b[i]; }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    simdgroup_float8x8 acc = make_filled_simdgroup_matrix<float, 8, 8>(1.0f);
    for (int q = 0; q < 16; q += 8) {  // an 8x16 by 16x8 product, over two 8-wide steps
        simdgroup_float8x8 fa, fb;
        simdgroup_load(fa, &as[q], 16);
        simdgroup_load(fb, &bs[q * 8], 8);
        simdgroup_multiply_accumulate(acc, fa, fb, acc);
    }
    simdgroup_store(acc, cs, 8);
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (uint i = lid.x; i < 64; i += 32) c[i] = cs[i];
}
"""
HARNESS = r"""
extern "C" void run_rotate(float* out, unsigned groups, unsigned n) {
    akg_emu::grid(groups, 1, 1, n, [&](uint3 tg, unsigned lid) { rotate(out, tg, uint3{lid, 0, 0}, uint3{n, 1, 1}); });
}
extern "C" void run_shuffle(float* out, unsigned n) {
    akg_emu::grid(1, 1, 1, n, [&](uint3, unsigned lid) { shuffle(out, uint3{lid, 0, 0}); });
}
extern "C" void run_reduce(const float* x, float* out, int64_t* idx, unsigned n) {
    akg_emu::grid(1, 1, 1, n, [&](uint3, unsigned lid) { reduce(x, out, idx, uint3{lid, 0, 0}, uint3{n, 1, 1}); });
}
extern "C" void run_math(const float* x, float* out, unsigned groups, unsigned n) {
    akg_emu::grid(groups, 1, 1, n, [&](uint3 tg, unsigned lid) {
        mathfns(x, out, uint3{lid, 0, 0}, tg, uint3{n, 1, 1}); });
}
extern "C" void run_mma(const float* a, const float* b, float* c) {
    akg_emu::grid(1, 1, 1, 32, [&](uint3, unsigned lid) { mma(a, b, c, uint3{lid, 0, 0}); });
}
"""


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    return emulate(KERNELS, HARNESS, tmp_path_factory.mktemp("metal"))


def ptr(t: torch.Tensor) -> ctypes.c_void_p:
    return ctypes.c_void_p(t.data_ptr())


def test_barrier_and_threadgroup_memory_per_group(lib):
    groups, n = 5, 96
    out = torch.zeros(groups * n)
    lib.run_rotate(ptr(out), groups, n)
    g = torch.arange(groups).repeat_interleave(n)
    lid = torch.arange(n).repeat(groups)
    assert torch.equal(out, (g * 1000 + (lid + 1) % n).float())  # each group saw its own tile, fully written


def test_simd_shuffle_down_stays_inside_its_simdgroup(lib):
    n = 80  # two full simdgroups and a partial one
    out = torch.zeros(n)
    lib.run_shuffle(ptr(out), n)
    want = [lid + 3 if lid % 32 + 3 < 32 and lid + 3 < n else lid for lid in range(n)]
    assert out.tolist() == [float(w) for w in want]


@pytest.mark.parametrize("n", [32, 100, 256])
def test_group_reductions(lib, n):
    x = torch.randn(n, generator=torch.Generator().manual_seed(n))
    x[n // 3] = x[n // 2] = x.max() + 1  # a tie: the first index wins, as in torch.argmax
    out, idx = torch.zeros(2), torch.zeros(1, dtype=torch.int64)
    lib.run_reduce(ptr(x), ptr(out), ptr(idx), n)
    assert out[0].item() == pytest.approx(x.sum().item(), rel=1e-5, abs=1e-5)
    assert out[1].item() == x.max().item() and idx.item() == n // 3 == int(torch.argmax(x))
    x[7] = math.nan
    lib.run_reduce(ptr(x), ptr(out), ptr(idx), n)
    assert math.isnan(out[1].item()) and idx.item() == 7  # NaN wins max and argmax, as in torch


def test_simdgroup_matrices_multiply_accumulate(lib):
    g = torch.Generator().manual_seed(3)
    a, b = torch.randn(8, 16, generator=g), torch.randn(16, 8, generator=g)
    c = torch.zeros(8, 8)
    lib.run_mma(ptr(a), ptr(b), ptr(c))
    assert torch.allclose(c, a @ b + 1.0, rtol=1e-5, atol=1e-5)  # strided loads, accumulation into the fill


def test_prelude_math_matches_libm(lib):
    x = torch.cat([torch.linspace(-6, 6, 2000), torch.tensor([1e-8, -1e-8, 1e-4, -0.9999, 20.0])])
    x = torch.nn.functional.pad(x, (0, 64 - x.numel() % 64))
    out = torch.zeros(3 * x.numel())
    lib.run_math(ptr(x), ptr(out), x.numel() // 64, 64)
    got = out.view(-1, 3).double()
    xd = x.double()
    for col, ref in enumerate((torch.erf(xd), torch.log1p(xd.clamp(min=-0.9999)), torch.expm1(xd))):
        ok = (x > -1) if col == 1 else torch.ones_like(x, dtype=torch.bool)
        err = ((got[:, col] - ref).abs() / ref.abs().clamp(min=1e-30))[ok]  # relative, tiny arguments included
        assert err.max().item() < 2e-6, (col, err.max().item(), x[ok][err.argmax()].item())


def test_written_module_says_it_runs_in_the_emulator(tmp_path):
    path = tmp_path / "m.py"
    path.write_text(render(build(problem_path("ew_activations_a"), "metal", "m4-max")))
    code = (f"import importlib.util, torch; s = importlib.util.spec_from_file_location('m', {str(path)!r}); "
            "m = importlib.util.module_from_spec(s); s.loader.exec_module(m); "
            "y = m.ModelNew()(torch.randn(16, 64)); print(tuple(y.shape))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                       env={"AKG_CACHE_DIR": str(tmp_path / "c"), "PATH": "/usr/bin:/bin"})
    assert r.returncode == 0, r.stderr
    assert "running the Metal kernels in akg's CPU emulator" in r.stderr and "(16, 64)" in r.stdout
