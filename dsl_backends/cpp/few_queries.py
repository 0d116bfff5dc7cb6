"""Attention for a few queries per batch entry (a decode step: one new token against its key/value cache).
The flash template puts queries along the vectors, so one query used one lane of sixteen; here the vectors
run along the key width and the value width instead. Each task (one batch entry: a sequence and a head)
takes two passes over its keys: the scores of every query (a dot product over the key width each, through
the kernel's score expression: scale, masks), then the softmax's maximum and sum per query, then the output
rows as the exponents times the value rows (a value's row read once for every query). The scores of a task
fit in its scratch (keys x queries floats), so nothing is rescaled."""

from __future__ import annotations

import math

from ir.kernel.analysis import AttnParts, split_attention
from ir.kernel.ir import Kernel
from ir.kernel.schedule import Schedule

from ..cstyle import CPrinter, decode
from .style import STYLE, omp

FEW = 4  # at most this many query rows per batch entry take this template
NINF = "-std::numeric_limits<float>::infinity()"


def few_queries(k: Kernel) -> bool:
    return math.prod(e for _, e in split_attention(k).rows) <= FEW


def epilogue(k: Kernel, a: AttnParts, pe: CPrinter, o: str, maximum: str) -> tuple[str, str]:
    """The kernel's value with `o` (O / L) in place of P @ V (0 where a guarded query's `maximum` is -inf, every
    key masked), and the flat index it is stored at, printed by `pe`."""
    pe.fixed[id(a.out)] = f"({maximum} == {NINF} ? 0.0f : {o})" if a.guarded else f"({o})"
    flat = " + ".join(f"{pe.env[v.name]} * {st}" if st != 1 else pe.env[v.name]
                      for v, st in zip(k.coords, k.out.strides())) or "0"
    return pe(k.expr), flat


def render(k: Kernel, s: Schedule, floor: str) -> list[str]:
    """The kernel's body; `floor`: the exponent at or below which a term is 0 (flash.EXP_FLOOR)."""
    a: AttnParts = split_attention(k)
    m_rows, n, e = math.prod(x for _, x in a.rows), a.j.extent, a.e.extent
    d, b = math.prod(x for _, x in a.cols), math.prod(x for _, x in a.batch)
    ind, inner = "        ", "            "
    out = [omp(s), f"    for (int64_t akg_bid = 0; akg_bid < {b}; ++akg_bid) {{",
           f"{ind}float* __restrict__ akg_q = akg_pack_scratch<float>({m_rows * (e + n + d + 2)});",
           f"{ind}float* __restrict__ akg_s = akg_q + {m_rows * e};  // scores, then exponents: [query][key]",
           f"{ind}float* __restrict__ akg_o = akg_s + {m_rows * n};  // output rows: [query][value column]",
           f"{ind}float* __restrict__ akg_m = akg_o + {m_rows * d};",
           f"{ind}float* __restrict__ akg_l = akg_m + {m_rows};"]
    pb = CPrinter(STYLE, {}, prefix="b", indent=ind)
    decode(a.batch, "akg_bid", pb)
    out += pb.lines
    benv = dict(pb.env)

    def row(m: int, prefix: str, indent: str, extra: dict[str, str]) -> CPrinter:
        p = CPrinter(STYLE, dict(benv, **extra), prefix=f"{prefix}{m}_", indent=indent)
        decode(a.rows, f"((int64_t){m})", p, bounded=True)
        return p

    for m in range(m_rows):  # the queries
        pq = row(m, "q", inner, {a.e.name: "akg_e"})
        qv = pq(a.q)
        out += [f"{ind}#pragma omp simd", f"{ind}for (int64_t akg_e = 0; akg_e < {e}; ++akg_e) {{", *pq.lines,
                f"{inner}akg_q[{m * e} + akg_e] = (float)({qv});", f"{ind}}}"]
    # pass 1: the scores, each key's row read once for every query
    pk = CPrinter(STYLE, dict(benv, **{a.j.name: "akg_j", a.e.name: "akg_e"}), prefix="k", indent=inner + "    ")
    pk.vector_vars = frozenset({a.e.name})  # a key row's case (cache or new token) is the same along it
    kv = pk(a.k)
    dots = [f"akg_dot{m}" for m in range(m_rows)]
    out += [f"{ind}for (int64_t akg_j = 0; akg_j < {n}; ++akg_j) {{",
            f"{inner}float {', '.join(x + ' = 0.0f' for x in dots)};",
            f"{inner}#pragma omp simd reduction(+: {', '.join(dots)})",
            f"{inner}for (int64_t akg_e = 0; akg_e < {e}; ++akg_e) {{", *pk.lines,
            f"{inner}    const float akg_k = (float)({kv});",
            *(f"{inner}    {x} += akg_q[{m * e} + akg_e] * akg_k;" for m, x in enumerate(dots)), f"{inner}}}"]
    for m in range(m_rows):  # each query's row coordinates in a scope of their own (they share names)
        ps = row(m, "s", inner + "    ", {a.j.name: "akg_j"})
        ps.fixed[id(a.qk)] = dots[m]
        sv = ps(a.score)
        out += [f"{inner}{{", *ps.lines, f"{inner}    akg_s[{m * n} + akg_j] = (float)({sv});", f"{inner}}}"]
    out.append(f"{ind}}}")
    # the softmax per query: its maximum, then exponents (0 at or below the floor, and for -inf) and their sum
    exp = STYLE.fn("exp", "float")
    for m in range(m_rows):
        at = f"akg_s[{m * n} + akg_j]"
        z = f"({at} - akg_ms)"
        p = STYLE.select(f"{z} > {floor}", f"{exp}({STYLE.select(f'{z} > {floor}', z, floor, 'float')})", "0.0f",
                         "float")
        out += [f"{ind}{{", f"{inner}float akg_mx = {NINF}, akg_sum = 0.0f;",
                f"{inner}#pragma omp simd reduction(max: akg_mx)",
                f"{inner}for (int64_t akg_j = 0; akg_j < {n}; ++akg_j) akg_mx = {at} > akg_mx ? {at} : akg_mx;",
                f"{inner}const float akg_ms = akg_mx == {NINF} ? 0.0f : akg_mx;",
                f"{inner}#pragma omp simd reduction(+: akg_sum)",
                f"{inner}for (int64_t akg_j = 0; akg_j < {n}; ++akg_j) {{",
                f"{inner}    const float akg_p = {STYLE.select(f'{at} == {NINF}', '0.0f', p, 'float')};",
                f"{inner}    {at} = akg_p;", f"{inner}    akg_sum += akg_p;", f"{inner}}}",
                f"{inner}akg_m[{m}] = akg_mx;", f"{inner}akg_l[{m}] = akg_sum;", f"{ind}}}"]
    # pass 2: the output rows, each value's row read once for every query
    pv = CPrinter(STYLE, dict(benv, **{a.j.name: "akg_j"}), prefix="v", indent=inner + "    ")
    decode(a.cols, "akg_d", pv, bounded=True)
    pv.vector_vars = frozenset(name for name, _ in a.cols)
    vv = pv(a.v)
    out += [f"{ind}std::fill(akg_o, akg_o + {m_rows * d}, 0.0f);",
            f"{ind}for (int64_t akg_j = 0; akg_j < {n}; ++akg_j) {{", f"{inner}#pragma omp simd",
            f"{inner}for (int64_t akg_d = 0; akg_d < {d}; ++akg_d) {{", *pv.lines,
            f"{inner}    const float akg_v = (float)({vv});",
            *(f"{inner}    akg_o[{m * d} + akg_d] += akg_s[{m * n} + akg_j] * akg_v;" for m in range(m_rows)),
            f"{inner}}}", f"{ind}}}"]
    # the epilogue: the kernel's value with O / L in place of P @ V
    for m in range(m_rows):
        pe = row(m, "e", inner, {})
        decode(a.cols, "akg_d", pe, bounded=True)
        val, flat = epilogue(k, a, pe, f"akg_o[{m * d} + akg_d] / akg_l[{m}]", f"akg_m[{m}]")
        out += [f"{ind}#pragma omp simd", f"{ind}for (int64_t akg_d = 0; akg_d < {d}; ++akg_d) {{", *pe.lines,
                f"{inner}out[{flat}] = {STYLE.store(k.out.dtype, val)};", f"{ind}}}"]
    return out + ["    }"]
