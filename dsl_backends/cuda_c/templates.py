"""CUDA-C text: the device prelude (half-precision conversions, block-wide reductions) and the Python
that builds and loads the kernels in a written module."""

from __future__ import annotations

from ..module import COMPILE_CACHED

PRELUDE_CU = r"""
#include <cstdint>
#include <limits>
#include <algorithm>
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <mma.h>
namespace wmma = nvcuda::wmma;
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

BUILD = COMPILE_CACHED + '''
_AKG_LIB = None


def _akg_lib():
    """Builds the kernels with nvcc on first use (cached by a hash of source, flags and arch)."""
    global _AKG_LIB
    if _AKG_LIB is None:
        if not torch.cuda.is_available():
            raise RuntimeError("this CUDA-C module needs an NVIDIA GPU; none is visible (CUDA_VISIBLE_DEVICES?)")
        _AKG_LIB = _akg_compile(_AKG_SOURCE, ["nvcc", *_AKG_NVCC, "-shared"], ".cu", "cuda-c")
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
