"""The C++ GEMM's fp32 register tiles as GCC vector extensions (dsl_backends/cpp/backend.py `_matmul`)."""

from __future__ import annotations

from collections.abc import Callable

PANEL_AHEAD = 1024  # bytes of B's packed panel prefetched ahead of the register tile's loads


def vector_width(nr: int, lanes: int) -> int | None:
    """Floats per vector of an NR-wide tile: the widest of 16, 8 and 4 the host has (`lanes`) that
    divides NR, so an NR of 32 is two vectors a row with AVX-512 and four with AVX2 (GCC lowers a
    vector wider than the host's through memory: an order of magnitude slower)."""
    return next((v for v in (16, 8, 4) if v <= lanes and nr % v == 0), None)


def vector_tile(mr: int, nr: int, kk: int, vec: int,
                a_at: Callable[[int], str] = lambda i: f"akg_ap[{i}][akg_q]") -> list[str]:
    """An fp32 MR x NR register tile as named vector variables, one statement per multiply-add: GCC keeps
    them in registers (a 2-D array tile it may leave in memory, a load and a store around every FMA). B's
    panel is one stream (packed in strips), loaded NR / vec vectors per k; A's value broadcast by the
    scalar-vector product. `vec`: floats per vector (`vector_width`); `a_at`: A's value at a row of the
    block (its packed panel, or the operand read in place)."""
    nv = nr // vec
    cs = [[f"akg_c{i}_{v}" for v in range(nv)] for i in range(mr)]
    lines = [f"                    typedef float akg_v __attribute__((vector_size({4 * vec})));",
             "                    akg_v " + ", ".join(f"{c} = {{}}" for row in cs for c in row) + ";",
             f"                    const float* akg_bq = akg_b[0] + (((akg_n0 + akg_j0) / {nr}) * {kk} + akg_k0) "
             f"* {nr};",
             "                    for (int64_t akg_q = 0; akg_q < akg_kw; ++akg_q) {",
             "                        akg_v " + ", ".join(f"akg_v{v}" for v in range(nv)) + ";"]
    # the panel streams from L2 (a panel of KC x NR floats fills L1): its lines prefetched PANEL_AHEAD bytes
    # ahead, where the hardware's prefetchers left the loads waiting on L2
    ahead = max(1, PANEL_AHEAD // (4 * nr))
    lines += [f"                        __builtin_prefetch(akg_bq + (akg_q + {ahead}) * {nr} + {off});"
              for off in range(0, nr, 16)]
    lines += [f"                        __builtin_memcpy(&akg_v{v}, akg_bq + akg_q * {nr} + {v * vec}, sizeof(akg_v));"
              for v in range(nv)]
    for i in range(mr):
        lines.append(f"                        {{ const float akg_a = {a_at(i)}; "
                     + " ".join(f"{cs[i][v]} += akg_a * akg_v{v};" for v in range(nv)) + " }")
    lines.append("                    }")
    return lines + _into_doubles(cs, vec)


def pair_tile(mr: int, nr: int, kk: int, vec: int) -> list[str]:
    """`vector_tile` over bf16 pairs (pack.bf16_pairs: B's K rows 2p and 2p + 1 interleaved column by
    column, A's panel bf16 bits), two K rows a step. With AVX512-BF16 one dot-product instruction
    (vdpbf16ps) multiplies a B vector of 16 columns' pairs by A's broadcast pair and adds both products
    into fp32 lanes: twice the FMA's work per instruction, half the bytes of B. Elsewhere a pair's 32
    bits give both floats by a shift and a mask, two FMAs."""
    nv = nr // vec
    cs = [[f"akg_c{i}_{v}" for v in range(nv)] for i in range(mr)]
    ahead = PANEL_AHEAD // 2  # bf16 values
    lines = [f"                    typedef float akg_v __attribute__((vector_size({4 * vec})));",
             f"                    typedef uint32_t akg_vu __attribute__((vector_size({4 * vec})));",
             "                    akg_v " + ", ".join(f"{c} = {{}}" for row in cs for c in row) + ";",
             f"                    const uint16_t* akg_bq = akg_b[0] + ((akg_n0 + akg_j0) / {nr}) * {kk * nr} "
             f"+ akg_k0 * {nr};",
             "                    for (int64_t akg_q = 0; akg_q < akg_kw; akg_q += 2) {",
             *[f"                        __builtin_prefetch(akg_bq + akg_q * {nr} + {ahead + off});"
               for off in range(0, 2 * nr, 32)],
             "                        akg_vu " + ", ".join(f"akg_w{v}" for v in range(nv)) + ";",
             *[f"                        __builtin_memcpy(&akg_w{v}, akg_bq + akg_q * {nr} + {2 * v * vec}, "
               "sizeof(akg_vu));" for v in range(nv)]]
    dot = [f"                        {{ uint32_t akg_a; __builtin_memcpy(&akg_a, &akg_ap[{i}][akg_q], 4); "
           "const __m512bh akg_ab = (__m512bh)_mm512_set1_epi32((int)akg_a); "
           + " ".join(f"{cs[i][v]} = (akg_v)_mm512_dpbf16_ps((__m512){cs[i][v]}, akg_ab, (__m512bh)akg_w{v});"
                      for v in range(nv)) + " }" for i in range(mr)]
    # a pair's low half is K row 2p: its float is the lane shifted up 16 bits; row 2p + 1's the lane masked
    split = ["                        akg_v " + ", ".join(
        f"akg_lo{v} = (akg_v)(akg_w{v} << 16), akg_hi{v} = (akg_v)(akg_w{v} & 0xffff0000u)" for v in range(nv)) + ";"]
    split += [f"                        {{ const float akg_a0 = akg_bf16_to_f32(akg_ap[{i}][akg_q]), "
              f"akg_a1 = akg_bf16_to_f32(akg_ap[{i}][akg_q + 1]); "
              + " ".join(f"{cs[i][v]} += akg_a0 * akg_lo{v} + akg_a1 * akg_hi{v};" for v in range(nv)) + " }"
              for i in range(mr)]
    if vec == 16:
        lines += ["#if defined(__AVX512BF16__)", *dot, "#else", *split, "#endif"]
    else:
        lines += split
    lines.append("                    }")
    return lines + _into_doubles(cs, vec)


def _into_doubles(cs: list[list[str]], vec: int) -> list[str]:
    """Each panel's sums into the block's double accumulators, half a vector at a time (a lane-by-lane
    loop became a shuffle, a scalar conversion and a scalar add per float)."""
    mr, nv = len(cs), len(cs[0])
    half = vec // 2
    lo, hi = ", ".join(map(str, range(half))), ", ".join(map(str, range(half, vec)))
    lines = [f"                    typedef double akg_vd __attribute__((vector_size({8 * half})));",
             "                    akg_vd akg_d;"]
    for i in range(mr):
        for v in range(nv):
            for h, lanes in ((0, lo), (1, hi)):
                dst = f"&akg_acc[{i}][akg_j0 + {v * vec + h * half}]"
                lines.append(f"                    __builtin_memcpy(&akg_d, {dst}, sizeof(akg_d)); "
                             f"akg_d += __builtin_convertvector(__builtin_shufflevector({cs[i][v]}, {cs[i][v]}, "
                             f"{lanes}), akg_vd); __builtin_memcpy({dst}, &akg_d, sizeof(akg_d));")
    return lines
