"""The C++ backend's style (its op table over `CStyle`), the source prelude, and what every template
shares: a kernel's extern "C" signature and its OpenMP loop header."""

from __future__ import annotations

import re
from collections.abc import Callable

from hardware_models.spec import HardwareModel
from ir.kernel.ir import Kernel, size_args
from ir.kernel.schedule import Schedule
from ir.sym import c_syntax

from ..cstyle import CStyle

# float functions glibc's libmvec has vector versions of: declared `omp declare simd` in the prelude,
# so gcc vectorises the loops that call them (std::exp(float) stays a scalar call). The written module
# defines AKG_MVEC_<name> for those whose every x86 variant the host's libmvec has (older glibc lacks
# some, other architectures all): elsewhere the same calls stay scalar.
VECTOR_MATH = {"exp": 1, "log": 1, "log1p": 1, "expm1": 1, "sin": 1, "cos": 1, "tanh": 1, "erf": 1, "pow": 2,
               "atan2": 2}
VECTOR_DECLS = "".join(f'#ifdef AKG_MVEC_{n}\n#pragma omp declare simd notinbranch\nextern "C" float {n}f('
                       f'{", ".join(["float"] * arity)}) noexcept;\n#endif\n' for n, arity in VECTOR_MATH.items())

PRELUDE_CPP = r"""
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>
#include <algorithm>
#include <type_traits>
#if defined(__x86_64__) && defined(__AVX512F__)
#define AKG_WIDE __attribute__((target("prefer-vector-width=512")))
#else
#define AKG_WIDE
#endif
template <typename T> static inline T akg_select(bool c, T a, T b) {
    using U = typename std::conditional<sizeof(T) == 4, uint32_t, uint64_t>::type;
    U ua, ub; std::memcpy(&ua, &a, sizeof(T)); std::memcpy(&ub, &b, sizeof(T));
    const U m = U(0) - U(c), r = (ua & m) | (ub & ~m);
    T out; std::memcpy(&out, &r, sizeof(T)); return out; }
static inline float akg_bf16_to_f32(uint16_t h) {
    uint32_t u = (uint32_t)h << 16; float f; std::memcpy(&f, &u, 4); return f; }
static inline uint16_t akg_f32_to_bf16(float f) {
    uint32_t u; std::memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;
    u += 0x7fffu + ((u >> 16) & 1u); return (uint16_t)(u >> 16); }
""" + VECTOR_DECLS + r"""// in arithmetic the compiler vectorises (GCC 12 converts _Float16 one at a time):
// exponent and mantissa moved to float's place, rebiased by 2^112 (subnormals included), inf/NaN kept
static inline float akg_f16_to_f32(uint16_t h) {
    const uint32_t em = (uint32_t)(h & 0x7fffu) << 13;
    float f; std::memcpy(&f, &em, 4); f *= 0x1p112f;
    uint32_t u; std::memcpy(&u, &f, 4);
    u |= ((h & 0x7c00u) == 0x7c00u ? 0x7f800000u : 0u) | ((uint32_t)(h & 0x8000u) << 16);
    std::memcpy(&f, &u, 4); return f; }
static inline uint16_t akg_f32_to_f16(float f) {
    _Float16 h = (_Float16)f; uint16_t u; std::memcpy(&u, &h, 2); return u; }
#if defined(__AVX__)
#include <immintrin.h>
#endif
// n floats from an aligned stack block to dst past the caches (non-temporal stores) where dst is aligned
static inline void akg_stream(float* __restrict__ dst, const float* __restrict__ src, int64_t n) {
    int64_t i = 0;
#if defined(__AVX__)
    if ((reinterpret_cast<uintptr_t>(dst) & 31) == 0)
        for (; i + 8 <= n; i += 8) _mm256_stream_ps(dst + i, _mm256_load_ps(src + i));
#endif
    for (; i < n; ++i) dst[i] = src[i];
}
static inline float* akg_row_scratch(int64_t n) {  // one per thread, kept between calls
    static thread_local std::vector<float> v;
    if ((int64_t)v.size() < n) v.resize(n);
    return v.data();
}
template <typename T> static inline T* akg_pack_scratch(int64_t n) {  // B's packed copy: one per thread, kept
    static thread_local std::vector<T> v;                           // (no zeroing and no page faults a call)
    if ((int64_t)v.size() < n) v.resize(n);
    return v.data();
}
// a tile stored column by column (column c at src + c * stride, its rows contiguous) to dst row-major
// (dst[r * ld + c], 64-byte aligned rows), rows x cols of it, at most 16 x 16; AVX-512: 16 loads,
// 64 shuffles, 16 stores
static inline void akg_tile_t(const float* __restrict__ src, int64_t stride, int rows, int cols,
                              float* __restrict__ dst, int64_t ld) {
#if defined(__AVX512F__)
    const __mmask16 m = (__mmask16)((1u << rows) - 1u);
    __m512 r[16], t[16];
    for (int c = 0; c < 16; ++c) r[c] = c < cols ? _mm512_maskz_loadu_ps(m, src + c * stride) : _mm512_setzero_ps();
    for (int i = 0; i < 16; i += 2) {  // per 128-bit lane: pairs of columns interleaved
        t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 16; i += 4) {  // r[i + j], lane L: row 4L + j of columns i..i+3
        const __m512d a = _mm512_castps_pd(t[i]), b = _mm512_castps_pd(t[i + 1]);
        const __m512d c = _mm512_castps_pd(t[i + 2]), d = _mm512_castps_pd(t[i + 3]);
        r[i] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
        r[i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
        r[i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, d));
        r[i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, d));
    }
    for (int j = 0; j < 4; ++j) {  // the 4 x 4 lanes of r[j], r[4 + j], r[8 + j], r[12 + j] transposed
        const __m512 x0 = _mm512_shuffle_f32x4(r[j], r[4 + j], 0x44), x1 = _mm512_shuffle_f32x4(r[j], r[4 + j], 0xEE);
        const __m512 x2 = _mm512_shuffle_f32x4(r[8 + j], r[12 + j], 0x44);
        const __m512 x3 = _mm512_shuffle_f32x4(r[8 + j], r[12 + j], 0xEE);
        t[j] = _mm512_shuffle_f32x4(x0, x2, 0x88);
        t[4 + j] = _mm512_shuffle_f32x4(x0, x2, 0xDD);
        t[8 + j] = _mm512_shuffle_f32x4(x1, x3, 0x88);
        t[12 + j] = _mm512_shuffle_f32x4(x1, x3, 0xDD);
    }
    for (int j = 0; j < rows; ++j) _mm512_store_ps(dst + j * ld, t[j]);
#else
    for (int c = 0; c < cols; ++c)
        for (int j = 0; j < rows; ++j) dst[j * ld + c] = src[j + c * stride];
#endif
}
static inline void akg_sfence() {
#if defined(__AVX__)
    _mm_sfence();
#endif
}
"""

class CppStyle(CStyle):
    math_ns = "std::"
    restrict = "__restrict__"
    simd_sums = True
    chunk_sums = True
    bounded_index = True
    simd_lanes = 16  # one AVX-512 vector of floats, two AVX2 ones
    prefetch_bytes = 4096
    fmax_call = False  # gcc 12 vectorises no loop that calls fmax on strided loads (a pooling window)

    def fn(self, name: str, t: str = "double") -> str:
        return f"{name}f" if t == "float" and name in VECTOR_MATH else super().fn(name, t)

    def masked_load(self, buf_dtype: str, buf: str, flat: str, mask: str, other: str, numel: str) -> str:
        # a load under `?:` is control flow gcc will not vectorise (a padded window stayed scalar);
        # an index clamped into the buffer is always in bounds (a gather), and the select drops it
        val = self.load(buf_dtype, f"{buf}[std::min<int64_t>(std::max<int64_t>({flat}, 0), ({numel}) - 1)]")
        t = "float" if buf_dtype in ("f32", "f16", "bf16") else "double" if buf_dtype == "f64" else ""
        return self.select(mask, val, other, t) if t else f"({mask} ? {val} : {other})"

    def select(self, c: str, a: str, b: str, t: str) -> str:
        # a bitwise select, not `?:`: gcc 12 does not if-convert a loop that also calls a vector
        # function, so a ternary would keep the whole loop scalar (measured: 12 ms -> 0.55 ms for
        # 2^20 floats of leaky_relu + exp, one thread)
        if t in ("float", "double"):
            return f"akg_select<{t}>({c}, {a}, {b})"
        return super().select(c, a, b, t)


STYLE = CppStyle()


def signature(k: Kernel, extra: tuple[str, ...] = (), wide: bool = False) -> str:
    """`extra`: parameters after the sizes; a kernel with any returns an int (what it tells its caller).
    `wide`: 512-bit loops (`AKG_WIDE`, wide.py)."""
    def restrict(name: str) -> str:  # an in-place kernel's output and operand are one array
        return "" if k.in_place and name in ("out", k.in_place) else STYLE.restrict

    ins = [f"const {STYLE.ctype(b.dtype)}* {restrict(b.name)} {b.name}" for b in k.inputs()]
    outs = [f"{STYLE.ctype(k.out.dtype)}* {restrict('out')} out"] + [
        f"{STYLE.ctype(b.dtype)}* {STYLE.restrict} {b.name}" for b, _ in k.also]
    params = ins + outs + [f"const int64_t {n}" for n in size_args(k)] + list(extra)
    return f'extern "C" {"AKG_WIDE " if wide else ""}{"int" if extra else "void"} {k.name}({", ".join(params)})'


def omp(s: Schedule) -> str:
    t = s.get("threads")
    return f"    #pragma omp parallel for schedule(static){f' num_threads({t})' if t else ''}"


Body = Callable[[Kernel, Schedule, HardwareModel], list[str]]


def kernel(body: Body, extra: Callable[[Kernel], tuple[str, ...]] = lambda k: ()
           ) -> Callable[[Kernel, Schedule, HardwareModel], str]:
    """A template's body inside the kernel's extern "C" signature (`extra`: its parameters beyond the
    kernel's buffers and sizes)."""
    def render(k: Kernel, s: Schedule, target: HardwareModel) -> str:
        with c_syntax():  # run-time sizes (--dynamic) in C
            return "\n".join([signature(k, extra(k), bool(s.get("wide"))) + " {", *body(k, s, target), "}"])
    return render


# the prelude's system includes, each under the guard it has there: what a written module precompiles once
# per toolchain (`_akg_pch`; parsing them was most of a small module's compile)
PCH_HEADER = "".join(re.findall(r"(?:#if defined\(__AVX__\)\n)?#include <[^>]+>\n(?:#endif\n)?", PRELUDE_CPP))
