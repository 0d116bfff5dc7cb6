"""fp32 GEMMs on an NVIDIA GPU: cuBLAS SGEMM (torch.mm, TF32 off) against a plain Triton 3xTF32 GEMM
(`tl.dot(..., input_precision="tf32x3")`) over 48 tiles, with each one's largest error against float64.
Needs a GPU; the result of 2026-11-30 is benchmarks/results/archive/h200-gemm-3xtf32-sweep-2026-11-30.txt.

    python benchmarks/gpu/sweep_3xtf32.py
"""
import itertools

import torch
import triton
import triton.language as tl


@triton.jit
def mm(a, b, c, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, G: tl.constexpr, P: tl.constexpr):
    pid = tl.program_id(0)
    nm, nn = tl.cdiv(M, BM), tl.cdiv(N, BN)
    grp = G * nn
    fm = (pid // grp) * G
    gs = tl.minimum(nm - fm, G)
    pm = fm + (pid % grp) % gs
    pn = (pid % grp) // gs
    mo = pm * BM + tl.arange(0, BM)
    no = pn * BN + tl.arange(0, BN)
    acc = tl.zeros([BM, BN], tl.float32)
    for k0 in range(0, K, BK):
        ko = k0 + tl.arange(0, BK)
        x = tl.load(a + mo[:, None] * K + ko[None, :], mask=(mo[:, None] < M) & (ko[None, :] < K), other=0.0)
        y = tl.load(b + ko[:, None] * N + no[None, :], mask=(ko[:, None] < K) & (no[None, :] < N), other=0.0)
        acc += tl.dot(x, y, input_precision=P)
    tl.store(c + mo[:, None] * N + no[None, :], acc, mask=(mo[:, None] < M) & (no[None, :] < N))
torch.backends.cuda.matmul.allow_tf32 = False
for (M, N, K) in [(4096, 3072, 768), (4096, 768, 3072), (4096, 4096, 4096)]:
    a, b = torch.randn(M, K, device="cuda"), torch.randn(K, N, device="cuda")
    ref = (a.double() @ b.double())
    t_cub = triton.testing.do_bench(lambda: a @ b)
    e_cub = ((a @ b).double() - ref).abs().max().item()
    res = []
    for BM, BN, BK, w, s in itertools.product((64, 128), (64, 128, 256), (32, 64), (4, 8), (3, 4)):
        if BM * BN > 128 * 256 or (BM * BK + BK * BN) * 4 * s > 200000:
            continue
        c = torch.empty(M, N, device="cuda")
        g = (triton.cdiv(M, BM) * triton.cdiv(N, BN),)
        try:
            f = lambda: mm[g](a, b, c, M, N, K, BM, BN, BK, 8, "tf32x3", num_warps=w, num_stages=s)
            f()
            t = triton.testing.do_bench(f, warmup=5, rep=20)
        except Exception:
            continue
        res.append((t, BM, BN, BK, w, s, (c.double() - ref).abs().max().item()))
    res.sort()
    fl = 2 * M * N * K
    print(f"{M}x{N}x{K}: cuBLAS {t_cub*1e3:.0f} us ({fl/t_cub/1e9:.0f} TF/s, err {e_cub:.2g}); best 3xTF32:",
          [(f"{t*1e3:.0f}us", bm, bn, bk, w, s, f"{e:.2g}") for t, bm, bn, bk, w, s, e in res[:5]], flush=True)
