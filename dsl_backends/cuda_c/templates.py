"""CUDA-C text: the device prelude (half-precision conversions, block-wide reductions), the tiled GEMM
template, and the Python that builds and loads the kernels in a written module."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from ir.kernel.ir import Kernel, Reduce

from ..base import UnsupportedKernel
from ..exprs import free_vars

PRELUDE_CU = r"""
#include <cstdint>
#include <limits>
#include <algorithm>
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
__device__ __forceinline__ float akg_bf16_to_f32(uint16_t h) { return __bfloat162float(__ushort_as_bfloat16(h)); }
__device__ __forceinline__ uint16_t akg_f32_to_bf16(float f) { return __bfloat16_as_ushort(__float2bfloat16_rn(f)); }
__device__ __forceinline__ float akg_f16_to_f32(uint16_t h) { return __half2float(__ushort_as_half(h)); }
__device__ __forceinline__ uint16_t akg_f32_to_f16(float f) { return __half_as_ushort(__float2half_rn(f)); }
// OP: 0 sum, 1 prod, 2 max, 3 min; NaN wins max and min, as in torch
template <int OP, typename T> __device__ __forceinline__ T akg_combine(T a, T b) {
    if (OP == 0) return a + b;
    if (OP == 1) return a * b;
    if (a != a || b != b) return a + b;
    return OP == 2 ? (a > b ? a : b) : (a < b ? a : b);
}
// every thread of the block calls it; every thread gets the block's result
template <int OP, typename T> __device__ T akg_block_reduce(T v, void* smem_) {
    T* smem = (T*)smem_;
    for (int o = 16; o > 0; o >>= 1) v = akg_combine<OP>(v, __shfl_down_sync(0xffffffffu, v, o));
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
    __syncthreads();  // the previous reduction's readers are done with smem
    if (lane == 0) smem[warp] = v;
    __syncthreads();
    if (threadIdx.x == 0) { T r = smem[0]; for (int w = 1; w < nw; ++w) r = akg_combine<OP>(r, smem[w]); smem[0] = r; }
    __syncthreads();
    return smem[0];
}
template <int MAX, typename T> __device__ __forceinline__ bool akg_better(T v2, int64_t i2, T v, int64_t i) {
    const bool n2 = v2 != v2, n1 = v != v;
    if (n2 || n1) return n2 && (!n1 || i2 < i);  // the first NaN wins, as in torch
    if (v2 == v) return i2 < i;                   // ties: the first index
    return MAX ? v2 > v : v2 < v;
}
template <int MAX, typename T> __device__ void akg_block_arg(T& v, int64_t& i, void* smem_, int64_t* smem_i) {
    T* smem = (T*)smem_;
    for (int o = 16; o > 0; o >>= 1) {
        const T v2 = __shfl_down_sync(0xffffffffu, v, o);
        const int64_t i2 = __shfl_down_sync(0xffffffffu, i, o);
        if (akg_better<MAX>(v2, i2, v, i)) { v = v2; i = i2; }
    }
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
    __syncthreads();
    if (lane == 0) { smem[warp] = v; smem_i[warp] = i; }
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int w = 1; w < nw; ++w) if (akg_better<MAX>(smem[w], smem_i[w], smem[0], smem_i[0])) {
            smem[0] = smem[w]; smem_i[0] = smem_i[w]; }
    }
    __syncthreads();
    v = smem[0]; i = smem_i[0];
}
"""

BUILD = '''
import ctypes as _ctypes
import hashlib as _hashlib
import os as _os
import subprocess as _subprocess
import threading as _threading
from pathlib import Path as _Path

_AKG_LIB = None


def _akg_lib():
    """Builds the kernels with nvcc on first use (cached by a hash of source, flags and arch)."""
    global _AKG_LIB
    if _AKG_LIB is None:
        if not torch.cuda.is_available():
            raise RuntimeError("this CUDA-C module needs an NVIDIA GPU; none is visible (CUDA_VISIBLE_DEVICES?)")
        key = _hashlib.sha256((_AKG_SOURCE + " ".join(_AKG_NVCC)).encode()).hexdigest()[:20]
        root = _Path(_os.environ.get("AKG_CACHE_DIR", _Path.home() / ".cache" / "akg")) / "cuda-c" / key
        lib = root / "kernels.so"
        if not lib.exists():
            root.mkdir(parents=True, exist_ok=True)
            cu = root / f"kernels.{_os.getpid()}.{_threading.get_ident()}.cu"  # concurrent builds never share a file
            cu.write_text(_AKG_SOURCE)
            tmp = root / f"kernels.{_os.getpid()}.{_threading.get_ident()}.so"
            r = _subprocess.run(["nvcc", *_AKG_NVCC, "-shared", str(cu), "-o", str(tmp)], capture_output=True,
                                text=True)
            if r.returncode:
                raise RuntimeError("nvcc failed: " + r.stderr[-2000:])
            _os.replace(tmp, lib)
            _os.replace(cu, root / "kernels.cu")
        _AKG_LIB = _ctypes.CDLL(str(lib))
        for name, nargs in _AKG_KERNELS.items():  # 64-bit pointers: ctypes would pass a bare int as a C int
            fn = getattr(_AKG_LIB, "launch_" + name)
            fn.argtypes = [_ctypes.c_void_p] * nargs
            fn.restype = _ctypes.c_int
    return _AKG_LIB


def _akg_stream():
    return torch.cuda.current_stream().cuda_stream


def _akg_check(err, name):
    if err:
        raise RuntimeError(f"CUDA error {err} launching {name}")
'''


MMA_LOOP = """\
        __syncthreads();
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
        __syncthreads();
    }}"""


def matmul_lines(k: Kernel, style: Any, printer: Callable[..., Any], decode: Callable[..., None]
                 ) -> tuple[list[str], str, str]:
    """Shared-memory tiled GEMM: a BMxBN tile of C per block, a TMxTN register tile per thread, the K
    loop in BK steps through shared memory; prologue in the tile loads, epilogue at the store. Locals
    are akg_-prefixed: buffers are named after the program's values (q, k, v, x, ...)."""
    dots = [r for r in k.reductions() if r.op == "dot"]
    if len(dots) != 1 or len(k.reductions()) != 1:
        raise UnsupportedKernel("not a single GEMM")
    dot: Reduce = dots[0]
    a_e, b_e = dot.body.args  # type: ignore[attr-defined]
    kv = dot.axes[0]
    a_vars, b_vars = free_vars(a_e) - {kv.name}, free_vars(b_e) - {kv.name}
    coords = [(v.name, v.extent) for v in k.coords]
    n_vars = [c for c in coords if c[0] in b_vars and c[0] not in a_vars]
    batch_vars = [c for c in coords if c[0] in a_vars and c[0] in b_vars]  # one GEMM per batch: grid z
    row_vars = [c for c in coords if c not in n_vars and c not in batch_vars]
    rows, n, kk = math.prod(e for _, e in row_vars), math.prod(e for _, e in n_vars), kv.extent
    batches = math.prod(e for _, e in batch_vars)
    s = k.schedule
    bm, bn, bk, tm, tn = (int(s.get(x, d)) for x, d in (("BM", 64), ("BN", 64), ("BK", 16), ("TM", 4), ("TN", 4)))
    nthreads = (bm // tm) * (bn // tn)
    ct = style.ctype_compute(k.out.dtype)
    kn = kv.name
    out = [f"    __shared__ float akg_As[{bk}][{bm} + 1];", f"    __shared__ float akg_Bs[{bk}][{bn} + 1];",
           f"    const int64_t akg_row0 = (int64_t)blockIdx.y * {bm}, akg_col0 = (int64_t)blockIdx.x * {bn};",
           "    const int64_t akg_batch = blockIdx.z;",
           f"    const int akg_tx = threadIdx.x % {bn // tn}, akg_ty = threadIdx.x / {bn // tn};",
           f"    float akg_acc[{tm}][{tn}] = {{}};",
           f"    for (int64_t akg_k0 = 0; akg_k0 < {kk}; akg_k0 += {bk}) {{",
           f"        for (int akg_i = threadIdx.x; akg_i < {bm * bk}; akg_i += {nthreads}) {{",
           f"            const int akg_r = akg_i / {bk}, akg_c = akg_i % {bk};",
           f"            const int64_t akg_row = akg_row0 + akg_r, {kn} = akg_k0 + akg_c;",
           "            float akg_v = 0.f;",
           f"            if (akg_row < {rows} && {kn} < {kk}) {{"]
    pa = printer(style, {kn: kn}, prefix="a", indent="                ")
    decode(batch_vars, "akg_batch", pa)
    decode(row_vars, "akg_row", pa)
    a_val = pa(a_e)
    out += pa.lines + [f"                akg_v = (float)({a_val});", "            }",
                       "            akg_As[akg_c][akg_r] = akg_v;", "        }",
                       f"        for (int akg_i = threadIdx.x; akg_i < {bk * bn}; akg_i += {nthreads}) {{",
                       f"            const int akg_r = akg_i / {bn}, akg_c = akg_i % {bn};",
                       f"            const int64_t akg_col = akg_col0 + akg_c, {kn} = akg_k0 + akg_r;",
                       "            float akg_v = 0.f;", f"            if (akg_col < {n} && {kn} < {kk}) {{"]
    pb = printer(style, {kn: kn}, prefix="b", indent="                ")
    decode(batch_vars, "akg_batch", pb)
    decode(n_vars, "akg_col", pb)
    b_val = pb(b_e)
    out += pb.lines + [f"                akg_v = (float)({b_val});", "            }",
                       "            akg_Bs[akg_r][akg_c] = akg_v;", "        }"]
    out += MMA_LOOP.format(bk=bk, tm=tm, tn=tn).splitlines()
    out += [f"    for (int akg_x = 0; akg_x < {tm}; ++akg_x) {{",
            f"        for (int akg_y = 0; akg_y < {tn}; ++akg_y) {{",
            f"            const int64_t akg_row = akg_row0 + akg_ty * {tm} + akg_x, "
            f"akg_col = akg_col0 + akg_tx * {tn} + akg_y;",
            f"            if (akg_row >= {rows} || akg_col >= {n}) continue;"]
    pe = printer(style, {}, prefix="e", indent="            ")
    pe.fixed[id(dot)] = f"(({ct})akg_acc[akg_x][akg_y])"
    decode(batch_vars, "akg_batch", pe)
    decode(row_vars, "akg_row", pe)
    decode(n_vars, "akg_col", pe)
    val = pe(k.expr)
    strides = k.out.strides()
    flat = " + ".join(f"{v.name} * {st}" if st != 1 else v.name for v, st in zip(k.coords, strides)) or "0"
    out += pe.lines + [f"            out[{flat}] = {style.store(k.out.dtype, val)};", "        }", "    }"]
    grid = f"dim3({-(-n // bn)}, {-(-rows // bm)}, {batches})"
    return out, grid, str(nthreads)
