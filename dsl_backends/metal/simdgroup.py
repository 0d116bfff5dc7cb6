"""GEMM on simdgroup matrices (`simdgroup_float8x8`): a 32x32 C tile per threadgroup of four simdgroups,
each 2x2 fragments of 8x8; operands (prologue applied) staged in threadgroup memory as float, the
accumulators staged back through threadgroup memory for the fused epilogue. Multiply-accumulate in fp32 on
fp32 (half operands are widened when staged), so fp32 stays fp32."""

from __future__ import annotations

import math

from ir.kernel.analysis import split_gemm
from ir.kernel.ir import Kernel
from ir.kernel.schedule import Schedule

from ..cstyle import CStyle
from ..simt import Dialect, epilogue, stage_operands

SCHEDULE = Schedule({"MMA": "simdgroup", "BM": 32, "BN": 32, "BK": 16})
BM, BN, BK, THREADS = 32, 32, 16, 128

CORE = """\
        {sync}
        for (int akg_q = 0; akg_q < {bk}; akg_q += 8) {{
            simdgroup_float8x8 akg_fa[2], akg_fb[2];
            for (int akg_x = 0; akg_x < 2; ++akg_x)
                simdgroup_load(akg_fa[akg_x], &akg_As[akg_wm * 16 + akg_x * 8][akg_q], {bk});
            for (int akg_y = 0; akg_y < 2; ++akg_y)
                simdgroup_load(akg_fb[akg_y], &akg_Bs[akg_q][akg_wn * 16 + akg_y * 8], {bn});
            for (int akg_x = 0; akg_x < 2; ++akg_x)
                for (int akg_y = 0; akg_y < 2; ++akg_y)
                    simdgroup_multiply_accumulate(akg_fc[akg_x][akg_y], akg_fa[akg_x], akg_fb[akg_y],
                                                  akg_fc[akg_x][akg_y]);
        }}
        {sync}
    }}
    for (int akg_x = 0; akg_x < 2; ++akg_x)
        for (int akg_y = 0; akg_y < 2; ++akg_y)
            simdgroup_store(akg_fc[akg_x][akg_y], &akg_Cs[akg_wm * 16 + akg_x * 8][akg_wn * 16 + akg_y * 8], {bn});
    {sync}"""


def dims(k: Kernel) -> tuple[tuple[int, int, int], int]:
    """Groups and threads of the simdgroup-matrix layout."""
    g = split_gemm(k)
    rows, n = math.prod(e for _, e in g.rows), math.prod(e for _, e in g.cols)
    return (-(-n // BN), -(-rows // BM), math.prod(e for _, e in g.batch)), THREADS


def simdgroup_lines(k: Kernel, style: CStyle, d: Dialect) -> list[str]:
    g = split_gemm(k)
    kk = g.k.extent
    rows, n = math.prod(e for _, e in g.rows), math.prod(e for _, e in g.cols)
    out = [f"    {d.shared} float akg_As[{BM}][{BK}];", f"    {d.shared} float akg_Bs[{BK}][{BN}];",
           f"    {d.shared} float akg_Cs[{BM}][{BN}];",
           f"    const int64_t akg_row0 = (int64_t){d.block}.y * {BM}, akg_col0 = (int64_t){d.block}.x * {BN};",
           f"    const int64_t akg_batch = {d.block}.z;",
           f"    const int akg_sg = {d.thread}.x / 32, akg_wm = akg_sg / 2, akg_wn = akg_sg % 2;",
           "    simdgroup_float8x8 akg_fc[2][2];",
           "    for (int akg_x = 0; akg_x < 2; ++akg_x) for (int akg_y = 0; akg_y < 2; ++akg_y)",
           "        akg_fc[akg_x][akg_y] = make_filled_simdgroup_matrix<float, 8, 8>(0.0f);",
           f"    for (int64_t akg_k0 = 0; akg_k0 < {kk}; akg_k0 += {BK}) {{"]
    out += stage_operands(style, g, (BM, BN, BK), (rows, n), d.thread, THREADS, "akg_As[akg_r][akg_c] = akg_v;",
                          "akg_Bs[akg_r][akg_c] = akg_v;")
    out += CORE.format(bk=BK, bn=BN, sync=d.sync).splitlines()
    out += [f"    for (int akg_i = {d.thread}.x; akg_i < {BM * BN}; akg_i += {THREADS}) {{",
            f"        const int64_t akg_row = akg_row0 + akg_i / {BN}, akg_col = akg_col0 + akg_i % {BN};",
            f"        if (akg_row >= {rows} || akg_col >= {n}) continue;"]
    out += epilogue(style, k, g, f"akg_Cs[akg_i / {BN}][akg_i % {BN}]", "        ") + ["    }"]
    return out
