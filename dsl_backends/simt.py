"""SIMT kernel layouts shared by the GPU dialects of the C-style renderer (CUDA-C, Metal): pointwise
grid-stride loops, one thread group per reduced output (per-thread partials, then a group-wide
combine), and a shared-memory tiled GEMM. A Dialect names the few things that differ: the shared
memory qualifier, the barrier, the thread and group indices."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ir.kernel.ir import Kernel

from .cstyle import CPrinter, CStyle, decode, split_gemm

REDUCE_OPS = {"sum": 0, "dot": 0, "prod": 1, "max": 2, "min": 3}  # the preludes' akg_combine<OP>


@dataclass(frozen=True)
class Dialect:
    shared: str  # qualifier of group-shared arrays
    sync: str  # a barrier across the group
    block: str  # the group's index (a 3-vector)
    thread: str  # the thread's index in its group
    block_dim: str  # threads per group
    grid_dim: str  # groups in the grid
    lane_args: str = ""  # extra arguments the prelude's group reductions need


def group_printer(d: Dialect) -> type[CPrinter]:
    class GroupPrinter(CPrinter):
        parallel = True

        def loop_header(self, j: str, ext: int, parallel: bool) -> str:
            if parallel:
                return f"for (int64_t {j} = {d.thread}.x; {j} < {ext}; {j} += {d.block_dim}.x) {{"
            return super().loop_header(j, ext, parallel)

        def combine_threads(self, op: str, acc: str) -> None:
            if op in ("argmax", "argmin"):
                arg = int(op == "argmax")
                self.emit(f"akg_block_arg<{arg}>({acc}, {acc}_i, akg_smem, akg_smem_i{d.lane_args});")
            else:
                self.emit(f"{acc} = akg_block_reduce<{REDUCE_OPS[op]}>({acc}, akg_smem{d.lane_args});")

    return GroupPrinter


def body_lines(k: Kernel, style: CStyle, d: Dialect) -> tuple[list[str], tuple[int, int, int], int]:
    """The kernel body, and its launch: groups (x, y, z) and threads per group."""
    n = k.out.numel
    if k.kind == "matmul":
        return matmul_lines(k, style, d)
    if k.kind == "reduce":
        threads = int(k.schedule.get("THREADS", 256))
        lines = [f"    {d.shared} int64_t akg_smem[32];  // 8-byte slots: any accumulator type",
                 f"    {d.shared} int64_t akg_smem_i[32];",
                 f"    for (int64_t akg_i = {d.block}.x; akg_i < {n}; akg_i += {d.grid_dim}.x) {{"]
        p = group_printer(d)(style, {}, indent="        ")
        decode([(v.name, v.extent) for v in k.coords], "akg_i", p)
        val = p(k.expr)
        lines += p.lines
        lines += [f"        if ({d.thread}.x == 0) out[akg_i] = {style.store(k.out.dtype, val)};", "    }"]
        return lines, (min(n, int(k.schedule.get("GROUPS", 1 << 20))), 1, 1), threads
    block = int(k.schedule.get("BLOCK", 256))
    lines = [f"    for (int64_t akg_i = (int64_t){d.block}.x * {d.block_dim}.x + {d.thread}.x; akg_i < {n}; "
             f"akg_i += (int64_t){d.grid_dim}.x * {d.block_dim}.x) {{"]
    p = CPrinter(style, {}, indent="        ")
    decode([(v.name, v.extent) for v in k.coords], "akg_i", p)
    val = p(k.expr)
    lines += p.lines
    lines += [f"        out[akg_i] = {style.store(k.out.dtype, val)};", "    }"]
    return lines, (min(-(-n // block), int(k.schedule.get("GROUPS", 1 << 20))), 1, 1), block


MMA_LOOP = """\
        {sync}
        #pragma unroll
        for (int akg_q = 0; akg_q < {bk}; ++akg_q) {{
            float akg_a[{tm}], akg_b[{tn}];
            #pragma unroll
            for (int akg_x = 0; akg_x < {tm}; ++akg_x) akg_a[akg_x] = akg_As[akg_q][akg_ty * {tm} + akg_x];
            #pragma unroll
            for (int akg_y = 0; akg_y < {tn}; ++akg_y) akg_b[akg_y] = akg_Bs[akg_q][akg_tx * {tn} + akg_y];
            #pragma unroll
            for (int akg_x = 0; akg_x < {tm}; ++akg_x)
                #pragma unroll
                for (int akg_y = 0; akg_y < {tn}; ++akg_y) akg_acc[akg_x][akg_y] += akg_a[akg_x] * akg_b[akg_y];
        }}
        {sync}
    }}"""


def matmul_lines(k: Kernel, style: Any, d: Dialect) -> tuple[list[str], tuple[int, int, int], int]:
    """Shared-memory tiled GEMM: a BMxBN tile of C per block, a TMxTN register tile per thread, the K
    loop in BK steps through shared memory; prologue in the tile loads, epilogue at the store. Locals
    are akg_-prefixed: buffers are named after the program's values (q, k, v, x, ...)."""
    g = split_gemm(k)
    dot, a_e, b_e, kv = g.dot, g.a, g.b, g.k
    row_vars, n_vars, batch_vars = g.rows, g.cols, g.batch  # one GEMM per batch: grid z
    rows, n, kk = math.prod(e for _, e in row_vars), math.prod(e for _, e in n_vars), kv.extent
    batches = math.prod(e for _, e in batch_vars)
    s = k.schedule
    bm, bn, bk, tm, tn = (int(s.get(x, d)) for x, d in (("BM", 64), ("BN", 64), ("BK", 16), ("TM", 4), ("TN", 4)))
    nthreads = (bm // tm) * (bn // tn)
    ct = style.ctype_compute(k.out.dtype)
    kn = kv.name
    out = [f"    {d.shared} float akg_As[{bk}][{bm} + 1];", f"    {d.shared} float akg_Bs[{bk}][{bn} + 1];",
           f"    const int64_t akg_row0 = (int64_t){d.block}.y * {bm}, akg_col0 = (int64_t){d.block}.x * {bn};",
           f"    const int64_t akg_batch = {d.block}.z;",
           f"    const int akg_tx = {d.thread}.x % {bn // tn}, akg_ty = {d.thread}.x / {bn // tn};",
           f"    float akg_acc[{tm}][{tn}] = {{}};",
           f"    for (int64_t akg_k0 = 0; akg_k0 < {kk}; akg_k0 += {bk}) {{",
           f"        for (int akg_i = {d.thread}.x; akg_i < {bm * bk}; akg_i += {nthreads}) {{",
           f"            const int akg_r = akg_i / {bk}, akg_c = akg_i % {bk};",
           f"            const int64_t akg_row = akg_row0 + akg_r, {kn} = akg_k0 + akg_c;",
           "            float akg_v = 0.f;",
           f"            if (akg_row < {rows} && {kn} < {kk}) {{"]
    pa = CPrinter(style, {kn: kn}, prefix="a", indent="                ")
    decode(batch_vars, "akg_batch", pa)
    decode(row_vars, "akg_row", pa)
    a_val = pa(a_e)
    out += pa.lines + [f"                akg_v = (float)({a_val});", "            }",
                       "            akg_As[akg_c][akg_r] = akg_v;", "        }",
                       f"        for (int akg_i = {d.thread}.x; akg_i < {bk * bn}; akg_i += {nthreads}) {{",
                       f"            const int akg_r = akg_i / {bn}, akg_c = akg_i % {bn};",
                       f"            const int64_t akg_col = akg_col0 + akg_c, {kn} = akg_k0 + akg_r;",
                       "            float akg_v = 0.f;", f"            if (akg_col < {n} && {kn} < {kk}) {{"]
    pb = CPrinter(style, {kn: kn}, prefix="b", indent="                ")
    decode(batch_vars, "akg_batch", pb)
    decode(n_vars, "akg_col", pb)
    b_val = pb(b_e)
    out += pb.lines + [f"                akg_v = (float)({b_val});", "            }",
                       "            akg_Bs[akg_r][akg_c] = akg_v;", "        }"]
    out += MMA_LOOP.format(bk=bk, tm=tm, tn=tn, sync=d.sync).splitlines()
    out += [f"    for (int akg_x = 0; akg_x < {tm}; ++akg_x) {{",
            f"        for (int akg_y = 0; akg_y < {tn}; ++akg_y) {{",
            f"            const int64_t akg_row = akg_row0 + akg_ty * {tm} + akg_x, "
            f"akg_col = akg_col0 + akg_tx * {tn} + akg_y;",
            f"            if (akg_row >= {rows} || akg_col >= {n}) continue;"]
    pe = CPrinter(style, {}, prefix="e", indent="            ")
    pe.fixed[id(dot)] = f"(({ct})akg_acc[akg_x][akg_y])"
    decode(batch_vars, "akg_batch", pe)
    decode(row_vars, "akg_row", pe)
    decode(n_vars, "akg_col", pe)
    val = pe(k.expr)
    strides = k.out.strides()
    flat = " + ".join(f"{v.name} * {st}" if st != 1 else v.name for v, st in zip(k.coords, strides)) or "0"
    out += pe.lines + [f"            out[{flat}] = {style.store(k.out.dtype, val)};", "        }", "    }"]
    return out, (-(-n // bn), -(-rows // bm), batches), nthreads
