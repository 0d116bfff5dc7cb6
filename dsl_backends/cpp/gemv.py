"""Few rows (batch 1-8 inference through a linear layer): in parallel over groups of NC output columns,
each group's dot products for every row in one pass over K. B is streamed once in its own layout, never
packed; NC rows of B stream side by side, each value of A loaded once for the NC columns.

Where B is stored along its columns (GPT-2's Conv1D weight [K, N], a matmul's right operand), a group is NC
neighbouring columns in vectors instead, K swept outermost: a row of B's group is one contiguous run, each
value of A broadcast against it (the dot-product order read B a row of N apart per lane: gathers, half of
every cache line unused, 5-7x the time on GPT-2's decode GEMVs).

Per row and column, fp32 partial sums over chunks of KC in SIMD lanes (one FMA a product), added to a
double accumulator per chunk, as the blocked GEMM's micro-tile does: a double per product (a conversion
and a 4-lane add each) made 8 rows compute-bound at 3.7x the time of reading B."""

from __future__ import annotations

import math

from hardware_models.spec import HardwareModel
from ir.kernel.analysis import split_gemm
from ir.kernel.divmod import linear, simplify_index
from ir.kernel.ir import Expr, Kernel, Load, Var, walk
from ir.kernel.schedule import Schedule

from ..cstyle import CHUNK_SUM, CPrinter, decode
from .style import STYLE, omp

SMALL_M = 8  # GEMMs with at most this many rows (batch 1-8 inference) take this template: no packing
NC_WIDTHS = (8, 4, 2, 1)  # column group widths tried, widest first


def small_m(k: Kernel) -> bool:
    """Whether the GEMM kernel takes this template: at most SMALL_M rows and no batch."""
    g = split_gemm(k)
    return not g.batch and math.prod(e for _, e in g.rows) <= SMALL_M


def one_column(k: Kernel) -> bool:
    """Whether the GEMM kernel is a matrix-vector product by its rows (one output column, more rows than
    `small_m` takes, no batch): each output a dot product of a row with the vector, which the reduce
    template sweeps in SIMD lanes along K. The blocked template's 12 x 32 register tile spent 31 of every
    32 lanes on nothing (KernelBench's 256 x 131072 matrix-vector product: 0.25x eager)."""
    g = split_gemm(k)
    return not g.batch and math.prod(e for _, e in g.cols) == 1 and not small_m(k)


def _shape(k: Kernel) -> tuple[int, int, int]:
    g = split_gemm(k)
    return math.prod(e for _, e in g.rows), math.prod(e for _, e in g.cols), g.k.extent


def along_n(k: Kernel) -> bool:
    """Whether B is read along the output's columns (the template's vector variant)."""
    g = split_gemm(k)
    live = [name for name, ext in g.cols if ext > 1]
    loads = [x for x in walk(g.b) if isinstance(x, Load) and len(x.index) > 1]
    return len(live) == 1 and bool(loads) and all(_unit_step(x.index[-1], live[0]) for x in loads)


def _unit_step(ix: Expr, col: str) -> bool:
    """Whether the index steps by one as `col` does, other coordinates of extent 1 aside (a view's
    `(c9 * 2304 + c10) % 2304` with c9 of extent 1 is c10)."""
    terms, _ = linear(simplify_index(ix))
    return (any(isinstance(a, Var) and a.name == col and c == 1 for a, c in terms.items())
            and all(isinstance(a, Var) and (a.extent == 1 or a.name == col) for a in terms))


def _vector_ncs(rows: int, n: int, target: HardwareModel) -> list[int]:
    """The vector variant's group widths: whole vectors whose rows x NC / lanes accumulators take at most
    half of the vector registers, dividing the columns, widest first (at least two groups a thread)."""
    lanes, regs = min(int(target.chip("simd_width")), 8), _registers(target)  # 256-bit: not a `wide` kernel
    threads = max(1, target.units)
    most = max(1, (regs // 2) // rows)
    ws = [lanes * v for v in range(most, 0, -1) if n % (lanes * v) == 0]
    return [w for w in ws if n // w >= 2 * threads] or ws[-1:]


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
    vector = _vector_ncs(rows, n, target) if along_n(k) else []
    nc = vector[0] if vector else next((c for c in _ncs(rows, n, target) if rows * c <= regs // 2), 1)
    return Schedule(NC=nc, KC=min(kk, CHUNK_SUM))


def small_m_space(k: Kernel, target: HardwareModel, threads: list[Schedule]) -> list[Schedule]:
    """Group widths x chunk depths x the thread variants, the default first."""
    rows, n, kk = _shape(k)
    first = small_m_default(k, target)
    kcs = sorted({first["KC"], min(kk, 512)}, reverse=True)
    ncs = (_vector_ncs(rows, n, target) if along_n(k) else []) or _ncs(rows, n, target)
    combos = [(nc, kc) for nc in ncs for kc in kcs]
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
    if along_n(k) and nc > 1 and n % nc == 0:
        return _render_vector(k, s, nc, kc, ct)
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


def _render_vector(k: Kernel, s: Schedule, nc: int, kc: int, ct: str) -> list[str]:
    """The vector variant: a group of NC columns, K outermost; fp32 partial sums over chunks of KC per row and
    column, added to double accumulators per chunk (the dot-product order's scheme)."""
    g = split_gemm(k)
    kv = g.k
    rows, n, _ = _shape(k)
    env = {name: "akg_col" if ext > 1 else "((int64_t)0)" for name, ext in g.cols}
    out = [omp(s), f"    for (int64_t akg_cg = 0; akg_cg < {n // nc}; ++akg_cg) {{",
           f"        double akg_acc[{rows}][{nc}] = {{}};",
           f"        for (int64_t akg_kb = 0; akg_kb < {kv.extent}; akg_kb += {kc}) {{",
           f"            const int64_t akg_ke = std::min<int64_t>({kv.extent}, akg_kb + {kc});",
           f"            {ct} akg_part[{rows}][{nc}] = {{}};",
           f"            for (int64_t {kv.name} = akg_kb; {kv.name} < akg_ke; ++{kv.name}) {{"]
    row_env = [_row_env(g.rows, m) for m in range(rows)]
    a_vals = []
    for m in range(rows):
        pa = CPrinter(STYLE, dict(row_env[m], **{kv.name: kv.name}), prefix=f"a{m}_", indent="                ")
        a_vals.append(pa(g.a))
        out += pa.lines
    pb = CPrinter(STYLE, dict(env, **{kv.name: kv.name}), prefix="b_", indent="                    ")
    b_val = pb(g.b)
    out += ["                #pragma omp simd", f"                for (int64_t akg_c = 0; akg_c < {nc}; ++akg_c) {{",
            f"                    const int64_t akg_col = akg_cg * {nc} + akg_c;", *pb.lines,
            f"                    const {ct} akg_b = ({ct})({b_val});",
            *(f"                    akg_part[{m}][akg_c] += ({ct})({a}) * akg_b;" for m, a in enumerate(a_vals)),
            "                }", "            }",
            f"            for (int akg_m = 0; akg_m < {rows}; ++akg_m)", "                #pragma omp simd",
            f"                for (int akg_c = 0; akg_c < {nc}; ++akg_c) akg_acc[akg_m][akg_c] += "
            "(double)akg_part[akg_m][akg_c];", "        }",
            f"        for (int64_t akg_c = 0; akg_c < {nc}; ++akg_c) {{",
            f"            const int64_t akg_col = akg_cg * {nc} + akg_c;"]
    for m in range(rows):
        pe = CPrinter(STYLE, dict(env, **row_env[m]), prefix=f"e{m}_", indent="            ")
        pe.fixed[id(g.dot)] = f"(({ct})akg_acc[{m}][akg_c])"
        val = pe(k.expr)
        flat = " + ".join(f"{pe.env[v.name]} * {st}" if st != 1 else pe.env[v.name]
                          for v, st in zip(k.coords, k.out.strides())) or "0"
        out += pe.lines + [f"            out[{flat}] = {STYLE.store(k.out.dtype, val)};"]
    return out + ["        }", "    }"]


def _row_env(row_vars: list[tuple[str, int]], m: int) -> dict[str, str]:
    """Row coordinates of flat row `m` as constants."""
    env, stride = {}, 1
    for name, ext in reversed(row_vars):
        env[name] = f"((int64_t){(m // stride) % ext})"
        stride *= ext
    return env
