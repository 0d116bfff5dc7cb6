"""Tensor-core GEMM for fp16/bf16 operands (nvcuda::wmma, fp32 accumulation, as cuBLAS does): a 64x64 C
tile per block of four warps, each warp 2x2 fragments of 16x16; operands (prologue applied) staged in
shared memory as 16-bit values, the accumulators staged through shared memory for the fused epilogue."""

from __future__ import annotations

import math

from ir.kernel.analysis import split_gemm
from ir.kernel.ir import Kernel
from ir.kernel.schedule import Schedule

from ..cstyle import CStyle
from ..simt import epilogue, gemm_grid, stage_operands, tile_origin

SCHEDULE = Schedule({"MMA": "wmma", "BM": 64, "BN": 64, "BK": 32, "num_warps": 4})
TYPES = {"bf16": "__nv_bfloat16", "f16": "__half"}


CORE = """\
        __syncthreads();
        for (int akg_q = 0; akg_q < {bk}; akg_q += 16) {{
            wmma::fragment<wmma::matrix_a, 16, 16, 16, {t}, wmma::row_major> akg_fa[2];
            wmma::fragment<wmma::matrix_b, 16, 16, 16, {t}, wmma::row_major> akg_fb[2];
            for (int akg_x = 0; akg_x < 2; ++akg_x)
                wmma::load_matrix_sync(akg_fa[akg_x], &akg_As[akg_wm * 32 + akg_x * 16][akg_q], {bk} + 8);
            for (int akg_y = 0; akg_y < 2; ++akg_y)
                wmma::load_matrix_sync(akg_fb[akg_y], &akg_Bs[akg_q][akg_wn * 32 + akg_y * 16], {bn} + 8);
            for (int akg_x = 0; akg_x < 2; ++akg_x)
                for (int akg_y = 0; akg_y < 2; ++akg_y)
                    wmma::mma_sync(akg_fc[akg_x][akg_y], akg_fa[akg_x], akg_fb[akg_y], akg_fc[akg_x][akg_y]);
        }}
        __syncthreads();
    }}
    for (int akg_x = 0; akg_x < 2; ++akg_x)
        for (int akg_y = 0; akg_y < 2; ++akg_y)
            wmma::store_matrix_sync(&akg_Cs[akg_wm * 32 + akg_x * 16][akg_wn * 32 + akg_y * 16], akg_fc[akg_x][akg_y],
                                    {bn} + 4, wmma::mem_row_major);
    __syncthreads();"""


def eligible(k: Kernel) -> bool:
    if k.kind != "matmul":
        return False
    try:
        g = split_gemm(k)
    except Exception:  # noqa: BLE001 - not a single GEMM: the scalar path says why
        return False
    return g.a.dtype == g.b.dtype and g.a.dtype in TYPES


def dims(k: Kernel, s: Schedule) -> tuple[tuple[int, int, int], int]:
    """Groups and threads of the wmma layout: 64 x 64 C tiles, four warps."""
    g = split_gemm(k)
    rows, n = math.prod(e for _, e in g.rows), math.prod(e for _, e in g.cols)
    return gemm_grid(s, -(-n // 64), -(-rows // 64), math.prod(e for _, e in g.batch)), 128


def wmma_lines(k: Kernel, style: CStyle, s: Schedule) -> list[str]:
    g = split_gemm(k)
    kk = g.k.extent
    rows, n = math.prod(e for _, e in g.rows), math.prod(e for _, e in g.cols)
    bm, bn, bk, nt = 64, 64, 32, 128
    t = TYPES[g.a.dtype]
    conv = "__float2bfloat16_rn" if g.a.dtype == "bf16" else "__float2half_rn"
    out = [f"    __shared__ __align__(32) {t} akg_As[{bm}][{bk} + 8];",
           f"    __shared__ __align__(32) {t} akg_Bs[{bk}][{bn} + 8];",
           f"    __shared__ __align__(32) float akg_Cs[{bm}][{bn} + 4];",
           *tile_origin(s, "blockIdx", (bm, bn), (rows, n), math.prod(e for _, e in g.batch)),
           "    const int akg_warp = threadIdx.x / 32, akg_wm = akg_warp / 2, akg_wn = akg_warp % 2;",
           "    nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float> akg_fc[2][2];",
           "    for (int akg_x = 0; akg_x < 2; ++akg_x) for (int akg_y = 0; akg_y < 2; ++akg_y)",
           "        nvcuda::wmma::fill_fragment(akg_fc[akg_x][akg_y], 0.0f);",
           f"    for (int64_t akg_k0 = 0; akg_k0 < {kk}; akg_k0 += {bk}) {{"]
    out += stage_operands(style, g, (bm, bn, bk), (rows, n), "threadIdx", nt, f"akg_As[akg_r][akg_c] = {conv}(akg_v);",
                          f"akg_Bs[akg_r][akg_c] = {conv}(akg_v);")
    out += CORE.format(t=t, bk=bk, bn=bn).splitlines()
    out += [f"    for (int akg_i = threadIdx.x; akg_i < {bm * bn}; akg_i += {nt}) {{",
                       f"        const int64_t akg_row = akg_row0 + akg_i / {bn}, akg_col = akg_col0 + akg_i % {bn};",
                       f"        if (akg_row >= {rows} || akg_col >= {n}) continue;"]
    out += epilogue(style, k, g, f"akg_Cs[akg_i / {bn}][akg_i % {bn}]", "        ") + ["    }"]
    return out
