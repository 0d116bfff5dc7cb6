"""The C++ attention template (ir.kernel.flash): each task owns BM query rows of one batch entry and sweeps
the keys in tiles of BN with a running maximum, sum and output accumulator per query (the flash recurrence),
so no n x n score tensor is stored. Everything runs transposed, queries along the vectors: the score tile
S^T (keys x queries) is K @ Q^T in register tiles (a key's element broadcast against a vector of queries,
Q^T packed once per task), the softmax update is elementwise across queries (their maxima and sums are
vectors), and O^T += V^T-broadcast x P^T the same way; K and V are copied per tile as they are stored (no
transposed packing: a transposed K tile's stores land a power of two apart, in one cache set). Each
element of Q, K, V is read through the kernel's own expressions (views, scales, transposes) and the score
through its score expression (scale, causal or added masks). Padding rows, keys and columns are zeros and
never stored."""

from __future__ import annotations

import math

from hardware_models.spec import HardwareModel
from ir.kernel.analysis import AttnParts, split_attention
from ir.kernel.ir import Kernel
from ir.kernel.schedule import Schedule

from ..cstyle import CPrinter, decode
from . import few_queries
from .style import STYLE, omp

TR = 8  # rows of a register tile: TR x two vectors of accumulators
# exponents at or below this give 0: e^-64 (1.6e-28) is 20 orders below fp32's resolution beside the row's
# largest term (1), and a tinier p (expf(-87) is 1.6e-38) times a value is subnormal: an FMA on one took ~100
# cycles (a masked score of finfo.min made GPT-2's decode attention 5.6x slower than with flush-to-zero)
EXP_FLOOR = "-64.0f"
KC = 32  # keys per run of P @ V: the run's P^T and V rows (8 KiB each at 64 queries) stay in L1
SCRATCH_BYTES = 1 << 18  # a task's packed tiles, scores and accumulators: within a core's L2


def _dims(a: AttnParts) -> tuple[int, int, int, int, int]:
    """(query rows M, keys N, key width E, value width D, batch B)."""
    return (math.prod(e for _, e in a.rows), a.j.extent, a.e.extent, math.prod(e for _, e in a.cols),
            math.prod(e for _, e in a.batch))


def _up(n: int, m: int) -> int:
    return -(-n // m) * m


def _vector(s: Schedule, target: HardwareModel) -> int:
    """Floats per vector the loops are compiled for: 512-bit ones where the kernel is `wide`, else 256."""
    lanes = int(target.chip("simd_width"))
    return lanes if s.get("wide") else min(lanes, 8)


def _scratch(a: AttnParts, bm: int, bn: int, tc: int) -> dict[str, int]:
    """Floats of each part of a task's scratch, in its order (padded to the register tile): Q^T (E x BM), the
    K tile (BN x E), the V tile (BN x D), the score tile S^T (BN x BM), the output accumulators O^T (D x BM),
    and five vectors over the queries: maxima, sums, the tile's maxima (then its rescales), sums, and the
    exponents' offsets."""
    _, _, e, d, _ = _dims(a)
    bmp, bnp, dp = _up(bm, tc), _up(bn, TR), _up(d, TR)
    return {"qt": e * bmp, "kp": bnp * e, "vp": bnp * dp, "st": bnp * bmp, "ot": dp * bmp, "m": bmp, "l": bmp,
            "mx": bmp, "sum": bmp, "ms": bmp}


def _tile(out: str, a_at: str, b_row: str, rows: str, cols: str, depth: str, tc: int, chunk: int = 0) -> list[str]:
    """out[r][c] = (or += with `chunk`) the sum over `depth` of a_at(r, t) * b_row(t)[c], in register tiles of
    TR rows x tc columns: `a_at` and `b_row` are C expressions in akg_r / akg_t (row, depth) and akg_c0 (the
    tile's first column). `chunk`: the depth in runs of this many, each over every tile (the b rows of a run
    stay in L1 while all the tiles read them), accumulating onto `out`."""
    at = out.format(r="akg_r0 + akg_x", c="akg_c0 + akg_y")
    tiles = [f"for (int64_t akg_r0 = 0; akg_r0 < {rows}; akg_r0 += {TR}) {{",
             f"    for (int64_t akg_c0 = 0; akg_c0 < {cols}; akg_c0 += {tc}) {{",
             f"        float akg_acc[{TR}][{tc}];",
             f"        for (int akg_x = 0; akg_x < {TR}; ++akg_x) for (int akg_y = 0; akg_y < {tc}; ++akg_y) "
             f"akg_acc[akg_x][akg_y] = {at if chunk else '0.0f'};",
             f"        for (int64_t akg_t = {'akg_t0' if chunk else '0'}; akg_t < "
             f"{f'std::min<int64_t>({depth}, akg_t0 + {chunk})' if chunk else depth}; ++akg_t) {{",
             f"            const float* __restrict__ akg_b = {b_row};",
             f"            for (int akg_x = 0; akg_x < {TR}; ++akg_x) {{",
             "                const int64_t akg_r = akg_r0 + akg_x;",
             f"                const float akg_a = {a_at};",
             "                #pragma omp simd",
             f"                for (int akg_y = 0; akg_y < {tc}; ++akg_y) akg_acc[akg_x][akg_y] += "
             "akg_a * akg_b[akg_y];",
             "            }", "        }",
             f"        for (int akg_x = 0; akg_x < {TR}; ++akg_x)", "            #pragma omp simd",
             f"            for (int akg_y = 0; akg_y < {tc}; ++akg_y) {at} = akg_acc[akg_x][akg_y];",
             "    }", "}"]
    if not chunk:
        return tiles
    return [f"for (int64_t akg_t0 = 0; akg_t0 < {depth}; akg_t0 += {chunk}) {{", *("    " + ln for ln in tiles), "}"]


def render_attention(k: Kernel, s: Schedule, target: HardwareModel) -> list[str]:
    if few_queries.few_queries(k):
        return few_queries.render(k, s, EXP_FLOOR)
    a = split_attention(k)
    M, N, E, D, B = _dims(a)
    tc = 2 * _vector(s, target)
    bm, bn = min(s["BM"], _up(M, tc)), min(s["BN"], _up(N, TR))
    bmp, bnp, dp = _up(bm, tc), _up(bn, TR), _up(D, TR)
    parts = _scratch(a, bm, bn, tc)
    nq, nk, nv, no = parts["qt"], parts["kp"], parts["vp"], parts["ot"]
    blocks = -(-M // bm)
    ind, inner = "        ", "            "
    vec = f"for (int64_t akg_i = 0; akg_i < {bmp}; ++akg_i)"
    out = [omp(s), f"    for (int64_t akg_task = 0; akg_task < {B * blocks}; ++akg_task) {{",
           f"{ind}const int64_t akg_bid = akg_task / {blocks}, akg_i0 = (akg_task % {blocks}) * {bm};",
           f"{ind}const int64_t akg_bm = std::min<int64_t>({bm}, {M} - akg_i0);",
           f"{ind}float* __restrict__ akg_qt = akg_pack_scratch<float>({sum(parts.values())});"]
    names = list(parts)
    for prev, name in zip(names, names[1:]):  # each part after the one before it
        out.append(f"{ind}float* __restrict__ akg_{name} = akg_{prev} + {parts[prev]};")
    pb = CPrinter(STYLE, {}, prefix="b", indent=ind)
    decode(a.batch, "akg_bid", pb)
    out += pb.lines
    benv = dict(pb.env)

    def per_query(indent: str, prefix: str) -> CPrinter:
        """A printer for a loop over the block's queries akg_i: the query's coordinates (a padding query
        reads the last row's: in bounds, never stored)."""
        p = CPrinter(STYLE, benv, prefix=prefix, indent=indent)
        p.emit(f"const int64_t akg_row = std::min<int64_t>(akg_i0 + akg_i, {M - 1});")
        decode(a.rows, "akg_row", p, bounded=True)
        return p

    ninf = few_queries.NINF
    pq = per_query(inner, "q")
    pq.env[a.e.name] = "akg_e"
    qv = pq(a.q)
    out += [f"{ind}std::fill(akg_qt, akg_qt + {nq}, 0.0f);", f"{ind}std::fill(akg_ot, akg_ot + {no}, 0.0f);",
            f"{ind}{vec} {{ akg_m[akg_i] = {ninf}; akg_l[akg_i] = 0.0f; }}",
            f"{ind}for (int64_t akg_e = 0; akg_e < {E}; ++akg_e) {{", f"{ind}    #pragma omp simd",
            f"{ind}    for (int64_t akg_i = 0; akg_i < akg_bm; ++akg_i) {{", *["    " + ln for ln in pq.lines],
            f"{inner}    akg_qt[akg_e * {bmp} + akg_i] = (float)({qv});", f"{ind}    }}", f"{ind}}}"]
    # causal: the keys past the block's last query's limit are -inf for all of its queries, skipped
    hi = f"std::min<int64_t>({N}, akg_i0 + akg_bm + {a.key_limit})" if a.key_limit is not None else str(N)
    pk = CPrinter(STYLE, dict(benv, **{a.j.name: "akg_j", a.e.name: "akg_e"}), prefix="k", indent=inner + "    ")
    pk.vector_vars = frozenset({a.e.name})  # a key row's case (cache or new token) is the same along it
    kv = pk(a.k)
    pv = CPrinter(STYLE, dict(benv, **{a.j.name: "akg_j"}), prefix="v", indent=inner + "    ")
    decode(a.cols, "akg_d", pv, bounded=True)
    pv.vector_vars = frozenset(name for name, _ in a.cols)
    vv = pv(a.v)
    out += [f"{ind}const int64_t akg_hi = {hi};",
            f"{ind}for (int64_t akg_j0 = 0; akg_j0 < akg_hi; akg_j0 += {bn}) {{",
            f"{ind}    const int64_t akg_bn = std::min<int64_t>({bn}, {N} - akg_j0);",
            f"{ind}    std::fill(akg_kp + akg_bn * {E}, akg_kp + {nk}, 0.0f);  // padding keys",
            f"{ind}    std::fill(akg_vp + akg_bn * {dp}, akg_vp + {nv}, 0.0f);",
            f"{ind}    for (int64_t akg_jj = 0; akg_jj < akg_bn; ++akg_jj) {{",
            f"{inner}const int64_t akg_j = akg_j0 + akg_jj;",
            f"{inner}#pragma omp simd", f"{inner}for (int64_t akg_e = 0; akg_e < {E}; ++akg_e) {{", *pk.lines,
            f"{inner}    akg_kp[akg_jj * {E} + akg_e] = (float)({kv});", f"{inner}}}",
            f"{inner}#pragma omp simd", f"{inner}for (int64_t akg_d = 0; akg_d < {D}; ++akg_d) {{", *pv.lines,
            f"{inner}    akg_vp[akg_jj * {dp} + akg_d] = (float)({vv});", f"{inner}}}",
            *([f"{inner}for (int64_t akg_d = {D}; akg_d < {dp}; ++akg_d) akg_vp[akg_jj * {dp} + akg_d] = 0.0f;"]
              if dp > D else []), f"{ind}    }}"]
    # S^T = K Q^T: a key's element broadcast against a vector of queries
    out += [f"{ind}    " + ln for ln in _tile(f"akg_st[({{r}}) * {bmp} + {{c}}]", f"akg_kp[akg_r * {E} + akg_t]",
                                             f"akg_qt + akg_t * {bmp} + akg_c0", str(bnp), str(bmp), str(E), tc)]
    # the score expression at each (key, query), the tile's maxima, the running ones, the rescale; a query
    # whose scores so far are all -inf keeps m = -inf and takes exponents against 0 (p and the rescale 0,
    # not NaN); a query masked everywhere ends 0 / 0, guarded to 0 where the kernel's value says so
    ps = per_query(inner + "    ", "s")
    ps.env[a.j.name] = "akg_j"
    ps.fixed[id(a.qk)] = f"akg_st[akg_jj * {bmp} + akg_i]"
    sv = ps(a.score)
    exp = STYLE.fn("exp", "float")

    def select(c: str, a: str, b: str) -> str:  # bitwise: a `?:` or std::max keeps gcc from vectorising expf
        return STYLE.select(c, a, b, "float")

    def clamped(z: str) -> str:  # the argument clamped too: libmvec's expf takes a slow path far below it
        return select(f"{z} > {EXP_FLOOR}", f"{exp}({select(f'{z} > {EXP_FLOOR}', z, EXP_FLOOR)})", "0.0f")

    out += [f"{ind}    {vec} {{ akg_mx[akg_i] = {ninf}; akg_sum[akg_i] = 0.0f; }}",
            f"{ind}    for (int64_t akg_jj = 0; akg_jj < akg_bn; ++akg_jj) {{",
            f"{inner}const int64_t akg_j = akg_j0 + akg_jj;", f"{inner}#pragma omp simd",
            f"{inner}{vec} {{", *ps.lines, f"{inner}    const float akg_x = (float)({sv});",
            f"{inner}    akg_st[akg_jj * {bmp} + akg_i] = akg_x;",
            f"{inner}    akg_mx[akg_i] = akg_x > akg_mx[akg_i] ? akg_x : akg_mx[akg_i];", f"{inner}}}", f"{ind}    }}",
            f"{ind}    #pragma omp simd", f"{ind}    {vec} {{",
            f"{inner}const float akg_mn = akg_mx[akg_i] > akg_m[akg_i] ? akg_mx[akg_i] : akg_m[akg_i];",
            f"{inner}akg_ms[akg_i] = akg_mn == {ninf} ? 0.0f : akg_mn;",
            f"{inner}const float akg_z = akg_m[akg_i] - akg_ms[akg_i];",
            f"{inner}akg_mx[akg_i] = {select(f'akg_m[akg_i] == {ninf}', '0.0f', clamped('akg_z'))};  // the rescale",
            f"{inner}akg_m[akg_i] = akg_mn;", f"{ind}    }}",
            f"{ind}    for (int64_t akg_jj = 0; akg_jj < akg_bn; ++akg_jj) {{", f"{inner}#pragma omp simd",
            f"{inner}{vec} {{", f"{inner}    const float akg_y = akg_st[akg_jj * {bmp} + akg_i];",
            # libmvec takes a slow path for vectors holding -inf (masked scores): those are 0 by a select
            f"{inner}    const float akg_z = akg_y - akg_ms[akg_i];",
            f"{inner}    const float akg_p = {select(f'akg_y == {ninf}', '0.0f', clamped('akg_z'))};",
            f"{inner}    akg_st[akg_jj * {bmp} + akg_i] = akg_p;", f"{inner}    akg_sum[akg_i] += akg_p;", f"{inner}}}",
            f"{ind}    }}", f"{ind}    #pragma omp simd",
            f"{ind}    {vec} akg_l[akg_i] = akg_l[akg_i] * akg_mx[akg_i] + akg_sum[akg_i];",
            f"{ind}    for (int64_t akg_d = 0; akg_d < {dp}; ++akg_d) {{", f"{inner}#pragma omp simd",
            f"{inner}{vec} akg_ot[akg_d * {bmp} + akg_i] *= akg_mx[akg_i];", f"{ind}    }}"]
    # O^T += V^T P^T over the tile's keys: a value's element broadcast against a vector of queries
    out += [f"{ind}    " + ln for ln in _tile(f"akg_ot[({{r}}) * {bmp} + {{c}}]", f"akg_vp[akg_t * {dp} + akg_r]",
                                             f"akg_st + akg_t * {bmp} + akg_c0", str(dp), str(bmp), "akg_bn", tc,
                                             chunk=KC)]
    out.append(f"{ind}}}")
    # the epilogue over the block's queries: the kernel's value with O / L in place of P @ V
    pe = per_query(inner, "e")
    qlines = pe.lines[:]
    pe.lines = []
    decode(a.cols, "akg_d", pe, bounded=True)
    val, flat = few_queries.epilogue(k, a, pe, f"akg_ot[akg_d * {bmp} + akg_i] / akg_l[akg_i]", "akg_m[akg_i]")
    out += [f"{ind}for (int64_t akg_i = 0; akg_i < akg_bm; ++akg_i) {{", *[ln[4:] for ln in qlines],
            f"{ind}    #pragma omp simd", f"{ind}    for (int64_t akg_d = 0; akg_d < {D}; ++akg_d) {{", *pe.lines,
            f"{inner}    out[{flat}] = {STYLE.store(k.out.dtype, val)};", f"{ind}    }}", f"{ind}}}", "    }"]
    return out


def default_schedule(k: Kernel, target: HardwareModel) -> Schedule:
    """The largest tiles whose scratch stays within SCRATCH_BYTES: BM query rows first (each key tile's
    packing is shared by more rows), then BN keys."""
    a = split_attention(k)
    M, N, _, _, _ = _dims(a)
    tc = 2 * int(target.chip("simd_width"))
    # causal: key tiles as tall as the query block, so the blocks skip the keys past their diagonal
    tiles = ((64, 64), (32, 32), (32, 16), (32, 8)) if a.key_limit is not None else \
        ((64, 256), (64, 128), (32, 128), (32, 64), (32, 32), (32, 16), (32, 8))
    for bm, bn in tiles:
        bm, bn = min(bm, _up(M, tc)), min(bn, _up(N, TR))
        if 4 * sum(_scratch(a, bm, bn, tc).values()) <= SCRATCH_BYTES:
            break
    return Schedule(BM=bm, BN=bn)


def space(k: Kernel, target: HardwareModel) -> list[Schedule]:
    a = split_attention(k)
    M, N, _, _, _ = _dims(a)
    tc = 2 * int(target.chip("simd_width"))
    first = default_schedule(k, target)
    if few_queries.few_queries(k):  # the few-query template has no tiles to choose
        return [first]
    rest = [Schedule(BM=bm, BN=bn) for bm in (16, 32, 64, 128) for bn in (64, 128, 256, 512)  # scratch: up to L2
            if bm <= _up(M, tc) and bn <= _up(N, TR) and 4 * sum(_scratch(a, bm, bn, tc).values()) <= 4 * SCRATCH_BYTES]
    return [first] + [s for s in rest if s != first]
