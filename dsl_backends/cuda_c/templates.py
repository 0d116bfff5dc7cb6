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


def _akg_bindings():
    """pybind11 wrappers taking each pointer and the stream as 64-bit integers (data_ptr() values)."""
    out = ["#include <cstdint>", "#include <pybind11/pybind11.h>"]
    for name, n in _AKG_KERNELS.items():
        out.append(f'extern "C" int launch_{name}(' + ", ".join(["void*"] * n) + ");")
    out.append("PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {")
    for name, n in _AKG_KERNELS.items():
        params = ", ".join(f"int64_t a{i}" for i in range(n))
        args = ", ".join(f"(void*)a{i}" for i in range(n))
        out.append(f'    m.def("launch_{name}", []({params}) {{ return launch_{name}({args}); }});')
    return "\\n".join(out + ["}", ""])


def _akg_extension():
    """Built by torch's C++ extension loader (ninja, nvcc), cached by a hash of source and flags: the
    kernels as written, and a small pybind11 file for the launchers (no torch headers: seconds, not a
    minute)."""
    import sys as _sys

    from torch.utils import cpp_extension

    salt = f"{torch.__version__} {_sys.version}"  # an extension is tied to this torch and Python
    key = _hashlib.sha256((_AKG_SOURCE + " ".join(_AKG_NVCC) + salt).encode()).hexdigest()[:20]
    root = _Path(_os.environ.get("AKG_CACHE_DIR", _Path.home() / ".cache" / "akg")) / "cuda-c-ext" / key
    root.mkdir(parents=True, exist_ok=True)
    files = []
    for fname, text in (("kernels.cu", _AKG_SOURCE), ("bind.cpp", _akg_bindings())):
        f = root / fname
        if not f.exists():  # written whole, then renamed: a concurrent build never reads half a file
            tmp = root / f"{fname}.{_os.getpid()}.{_threading.get_ident()}"
            tmp.write_text(text)
            _os.replace(tmp, f)
        files.append(str(f))
    flags = [f for f in _AKG_NVCC if f not in ("-Xcompiler", "-fPIC")]  # -arch= stops torch adding its own
    try:
        return cpp_extension.load(name=f"akg_cuda_{key}", sources=files[::-1], extra_cuda_cflags=flags,
                                  extra_cflags=["-O2"], build_directory=str(root), verbose=False)
    except RuntimeError as e:
        if "Ninja is required" in str(e):
            raise RuntimeError("torch's C++ extension loader needs ninja: pip install ninja, or set "
                               "AKG_CUDA_LOADER=ctypes to build with nvcc alone") from None
        raise


def _akg_lib():
    """Builds the kernels on first use: through torch's C++ extension loader, or with nvcc alone into a
    shared library called through ctypes when AKG_CUDA_LOADER=ctypes (no ninja or pybind11 needed)."""
    global _AKG_LIB
    if _AKG_LIB is None:
        loader = _os.environ.get("AKG_CUDA_LOADER", "torch")
        if loader not in ("torch", "ctypes"):
            raise RuntimeError(f"AKG_CUDA_LOADER={loader!r}: use torch (the default) or ctypes")
        if not torch.cuda.is_available():
            raise RuntimeError("this CUDA-C module needs an NVIDIA GPU; none is visible (CUDA_VISIBLE_DEVICES?)")
        if loader == "torch":
            _AKG_LIB = _akg_extension()
            return _AKG_LIB
        lib = _akg_compile(_AKG_SOURCE, ["nvcc", *_AKG_NVCC, "-shared"], ".cu", "cuda-c")
        for name, nargs in _AKG_KERNELS.items():  # 64-bit pointers: ctypes would pass a bare int as a C int
            fn = getattr(lib, "launch_" + name)
            fn.argtypes = [_ctypes.c_void_p] * nargs
            fn.restype = _ctypes.c_int
        _AKG_LIB = lib
    return _AKG_LIB


def _akg_stream():
    return torch.cuda.current_stream().cuda_stream


def _akg_check(err, name):
    if err:
        raise RuntimeError(f"CUDA error {err} launching {name}")
'''
