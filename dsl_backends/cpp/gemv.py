"""Few rows (batch 1-8 inference through a linear layer): in parallel over groups of NC output columns,
each group's dot products for every row in one pass over K. B is streamed once in its own layout, never
packed; NC rows of B stream side by side, each value of A loaded once for the NC columns.

Per row and column, fp32 partial sums over chunks of KC in SIMD lanes (one FMA a product), added to a
double accumulator per chunk, as the blocked GEMM's micro-tile does: a double per product (a conversion
and a 4-lane add each) made 8 rows compute-bound at 3.7x the time of reading B."""

from __future__ import annotations

import math

from hardware_models.spec import HardwareModel
from ir.kernel.analysis import split_gemm
from ir.kernel.ir import Kernel
from ir.kernel.schedule import Schedule

from ..cstyle import CHUNK_SUM, CPrinter, decode
from .style import STYLE, omp

SMALL_M = 8  # GEMMs with at most this many rows (batch 1-8 inference) take this template: no packing
NC_WIDTHS = (8, 4, 2, 1)  # column group widths tried, widest first


def small_m(k: Kernel) -> bool:
    """Whether the GEMM kernel takes this template: at most SMALL_M rows and no batch."""
    g = split_gemm(k)
    return not g.batch and math.prod(e for _, e in g.rows) <= SMALL_M


def _shape(k: Kernel) -> tuple[int, int, int]:
    g = split_gemm(k)
    return math.prod(e for _, e in g.rows), math.prod(e for _, e in g.cols), g.k.extent


def _ncs(rows: int, n: int, target: HardwareModel) -> list[int]:
    """Column group widths whose rows x NC vector accumulators fit in the vector registers beside A's and
    B's vectors, dividing the columns, widest first."""
    regs = _registers(target)
    return [nc for nc in NC_WIDTHS if rows * nc + nc + 1 <= regs and n % nc == 0] or [1]


def _registers(target: HardwareModel) -> int:
    fig = target.fig("chip", "vector_registers")
    return int(fig.value) if fig is not None else 16  # AVX2's, where the model does not say


def small_m_default(k: Kernel, target: HardwareModel) -> Schedule:
    """The widest group whose accumulators take at most half of the vector registers (a group streams
    NC rows of B at once; rows x NC accumulators hide the FMA latency); one chunk of K up to CHUNK_SUM
    (each chunk ends in a horizontal sum per accumulator: short chunks were measurably slower)."""
    rows, n, kk = _shape(k)
    regs = _registers(target)
    nc = next((c for c in _ncs(rows, n, target) if rows * c <= regs // 2), 1)
    return Schedule(NC=nc, KC=min(kk, CHUNK_SUM))


def small_m_space(k: Kernel, target: HardwareModel, threads: list[Schedule]) -> list[Schedule]:
    """Group widths x chunk depths x the thread variants, the default first."""
    rows, n, kk = _shape(k)
    first = small_m_default(k, target)
    kcs = sorted({first["KC"], min(kk, 512)}, reverse=True)
    combos = [(nc, kc) for nc in _ncs(rows, n, target) for kc in kcs]
    combos.sort(key=lambda c: c != (first["NC"], first["KC"]))
    return [t.replace(NC=nc, KC=kc) for t in threads for nc, kc in combos]


def render_small_m(k: Kernel, s: Schedule) -> list[str]:
    """The kernel's body. A schedule without NC (a database entry from before it existed) is one column."""
    g = split_gemm(k)
    kv = g.k
    rows, n, _ = _shape(k)
    nc = int(s.get("NC", 1))
    kc = min(int(s["KC"]), kv.extent)
    ct = STYLE.ctype_compute(k.out.dtype)
    out = [omp(s), f"    for (int64_t akg_cg = 0; akg_cg < {n // nc}; ++akg_cg) {{"]
    cols = [CPrinter(STYLE, {}, indent="        ") for _ in range(nc)]
    for j, pc in enumerate(cols):  # column j of the group: its coordinates under names of its own
        decode(g.cols, f"(akg_cg * {nc} + {j})", pc, suffix=f"_{j}")
        out += pc.lines
    accs = [[f"akg_acc{m}_{j}" for j in range(nc)] for m in range(rows)]
    parts = [[f"akg_part{m}_{j}" for j in range(nc)] for m in range(rows)]
    flat_accs = [a for row in accs for a in row]
    flat_parts = [p for row in parts for p in row]
    out += [f"        double {', '.join(a + ' = 0.0' for a in flat_accs)};",
            f"        for (int64_t akg_kb = 0; akg_kb < {kv.extent}; akg_kb += {kc}) {{",
            f"            const int64_t akg_ke = std::min<int64_t>({kv.extent}, akg_kb + {kc});",
            f"            {ct} {', '.join(p + ' = 0' for p in flat_parts)};",
            f"            #pragma omp simd reduction(+: {', '.join(flat_parts)})",
            f"            for (int64_t {kv.name} = akg_kb; {kv.name} < akg_ke; ++{kv.name}) {{"]
    b_vals = []
    for j, pc in enumerate(cols):
        pb = CPrinter(STYLE, dict(pc.env, **{kv.name: kv.name}), prefix=f"b{j}_", indent="                ")
        b_vals.append(pb(g.b))
        out += pb.lines
    row_env = [_row_env(g.rows, m) for m in range(rows)]
    for m in range(rows):
        pa = CPrinter(STYLE, dict(row_env[m], **{kv.name: kv.name}), prefix=f"a{m}_", indent="                ")
        a_val = pa(g.a)
        out += pa.lines + [f"                {parts[m][j]} += ({ct})({a_val}) * ({ct})({b});"
                           for j, b in enumerate(b_vals)]
    out += ["            }", *(f"            {a} += (double){p};" for a, p in zip(flat_accs, flat_parts)), "        }"]
    for j, pc in enumerate(cols):
        for m in range(rows):
            pe = CPrinter(STYLE, dict(pc.env, **row_env[m]), prefix=f"e{m}_{j}_", indent="        ")
            pe.fixed[id(g.dot)] = f"(({ct}){accs[m][j]})"
            val = pe(k.expr)
            flat = " + ".join(f"{pe.env[v.name]} * {st}" if st != 1 else pe.env[v.name]
                              for v, st in zip(k.coords, k.out.strides())) or "0"
            out += pe.lines + [f"        out[{flat}] = {STYLE.store(k.out.dtype, val)};"]
    return out + ["    }"]


def _row_env(row_vars: list[tuple[str, int]], m: int) -> dict[str, str]:
    """Row coordinates of flat row `m` as constants."""
    env, stride = {}, 1
    for name, ext in reversed(row_vars):
        env[name] = f"((int64_t){(m // stride) % ext})"
        stride *= ext
    return env
