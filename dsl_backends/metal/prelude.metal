#include <metal_stdlib>
using namespace metal;
#ifndef AKG_TG
#define AKG_TG threadgroup
#endif
#ifndef AKG_EMULATED  // the emulator has these from <cstdint>
typedef long int64_t;
typedef int int32_t;
typedef short int16_t;
typedef char int8_t;
typedef uchar uint8_t;
typedef ushort uint16_t;
#endif
// half precision travels as raw 16-bit words; math is in float
inline float akg_f16_to_f32(uint16_t h) { return float(as_type<half>(h)); }
inline uint16_t akg_f32_to_f16(float f) { return as_type<uint16_t>(half(f)); }
inline float akg_bf16_to_f32(uint16_t h) { return as_type<float>(uint(h) << 16); }
inline uint16_t akg_f32_to_bf16(float f) {
    uint u = as_type<uint>(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;
    u += 0x7fffu + ((u >> 16) & 1u);
    return uint16_t(u >> 16);
}
// MSL has no erf, log1p or expm1: accurate float versions
inline float akg_erf(float x) {  // series near 0, else 1 - erfc (Chebyshev fit, fractional error < 1.2e-7)
    const float ax = metal::fabs(x);
    if (ax < 0.5f) {
        const float x2 = x * x;
        return 1.1283791671f * x * (1.0f + x2 * (-1.0f / 3 + x2 * (1.0f / 10 + x2 * (-1.0f / 42 + x2 * (1.0f / 216 +
            x2 * (-1.0f / 1320))))));
    }
    const float t = 1.0f / (1.0f + 0.5f * metal::fabs(x));
    const float y = 1.0f - t * metal::precise::exp(-x * x - 1.26551223f + t * (1.00002368f + t * (0.37409196f +
        t * (0.09678418f + t * (-0.18628806f + t * (0.27886807f + t * (-1.13520398f + t * (1.48851587f +
        t * (-0.82215223f + t * 0.17087277f)))))))));
    return x >= 0.0f ? y : -y;
}
inline float akg_log1p(float x) {  // log(1+x) with the rounding of 1+x compensated
    const float u = 1.0f + x;
    return u == 1.0f ? x : metal::precise::log(u) * x / (u - 1.0f);
}
inline float akg_expm1(float x) {
    const float u = metal::precise::exp(x);
    if (u == 1.0f) return x;
    if (u - 1.0f == -1.0f) return -1.0f;
    return (u - 1.0f) * x / metal::precise::log(u);
}
// OP: 0 sum, 1 prod, 2 max, 3 min; NaN wins max and min, as in torch
template <int OP, typename T> inline T akg_combine(T a, T b) {
    if (OP == 0) return a + b;
    if (OP == 1) return a * b;
    if (a != a || b != b) return a + b;
    return OP == 2 ? (a > b ? a : b) : (a < b ? a : b);
}
// every thread of the group calls it; every thread gets the group's result
template <int OP, typename T> inline T akg_block_reduce(T v, threadgroup int64_t* smem_, uint lid, uint n) {
    threadgroup T* smem = (threadgroup T*)smem_;
    for (ushort o = 16; o > 0; o >>= 1) {
        const T other = simd_shuffle_down(v, o);
        if (lid % 32 + o < 32 && lid + o < n) v = akg_combine<OP>(v, other);  // only lanes that exist
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (lid % 32 == 0) smem[lid / 32] = v;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (lid == 0) { T r = smem[0]; for (uint w = 1; w < (n + 31) / 32; ++w) r = akg_combine<OP>(r, smem[w]); smem[0] = r; }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    return smem[0];
}
template <int MAX, typename T> inline bool akg_better(T v2, int64_t i2, T v, int64_t i) {
    const bool n2 = v2 != v2, n1 = v != v;
    if (n2 || n1) return n2 && (!n1 || i2 < i);
    if (v2 == v) return i2 < i;
    return MAX ? v2 > v : v2 < v;
}
template <int MAX, typename T>
inline void akg_block_arg(thread T& v, thread int64_t& i, threadgroup int64_t* smem_, threadgroup int64_t* smem_i,
                          uint lid, uint n) {
    threadgroup T* smem = (threadgroup T*)smem_;
    for (ushort o = 16; o > 0; o >>= 1) {
        const T v2 = simd_shuffle_down(v, o);
        const int64_t i2 = simd_shuffle_down(i, o);
        if (lid % 32 + o < 32 && lid + o < n && akg_better<MAX>(v2, i2, v, i)) { v = v2; i = i2; }
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (lid % 32 == 0) { smem[lid / 32] = v; smem_i[lid / 32] = i; }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (lid == 0) {
        for (uint w = 1; w < (n + 31) / 32; ++w) if (akg_better<MAX>(smem[w], smem_i[w], smem[0], smem_i[0])) {
            smem[0] = smem[w]; smem_i[0] = smem_i[w]; }
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    v = smem[0]; i = smem_i[0];
}
