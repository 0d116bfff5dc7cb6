"""C++ backend: OpenMP-parallel outer loops, vectorisable inner loops, a row-streaming GEMM; one
shared library per module, built with -O3 for the host and cached by a hash of source, flags and CPU."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from pathlib import Path

from hardware_models.cost import Tiling
from hardware_models.spec import HardwareModel
from ir.kernel.analysis import split_gemm
from ir.kernel.interior import interior
from ir.kernel.ir import Kernel, KernelProgram, Load, Reduce, Var, size_args, walk
from ir.kernel.schedule import Schedule, Schedules

from ..base import BackendBase, Frame, Manifest, Ref, Template, UnsupportedKernel
from ..chain import Chain, plan_chains
from ..cstyle import CPrinter, decode
from ..exprs import FLOATS, reads_along, row_coords, rows_lead, strided_reduction
from ..module import COMPILE_CACHED, UNIT
from ..prefetch import next_row_prefetches
from ..sweep import Sweep, row_sweep, segmented_columns
from . import chain, flash, pack, pyext
from .columns import column_values, precompute
from .gemv import one_column, render_small_m, small_m, small_m_default, small_m_space
from .pack import PACK_RUNTIME, pack_check, pack_launch, pack_loops, pack_params, weight_bufs
from .rows import ROW_LOOP_MIN, merged_columns, rows_then_columns
from .scan import render_scan
from .stream import STREAM_BLOCK, blocks, parallel, stream_default, streamable, streamed
from .style import PCH_HEADER, PRELUDE_CPP, STYLE, VECTOR_MATH, kernel, omp
from .terms import cache_terms
from .tile import pair_tile, vector_tile, vector_width
from .transpose import transposed_coord, transposed_tiles
from .uniform import render_uniform, uniform_select
from .wide import with_width

MANIFEST = Manifest.load(Path(__file__).with_name("manifest.toml"))

BUILD = COMPILE_CACHED + pyext.RUNTIME + '''
import platform as _platform

_AKG_FLAGS = ["-O3", "-march=native", "-fopenmp", "-shared", "-fPIC", "-std=c++17"]


def _akg_cpu():  # -march=native ties a library to the host CPU (its name and extensions): part of the cache key
    try:
        with open("/proc/cpuinfo") as f:
            lines = [ln for ln in f if ln.startswith(("model name", "flags", "Features"))]
        return "".join(dict.fromkeys(lines)) or _platform.machine()
    except OSError:
        return _platform.processor() or _platform.machine()


def _akg_mvec():  # libmvec's vector float math, where it has every x86 width (SSE to AVX-512)
    try:
        lib = _ctypes.CDLL("libmvec.so.1")
    except OSError:
        return []
    widths = (("b", 4), ("c", 8), ("d", 8), ("e", 16))
    return [f"-DAKG_MVEC_{n}" for n, arity in _AKG_VECTOR_MATH.items()
            if all(hasattr(lib, f"_ZGV{isa}N{w}{'v' * arity}_{n}f") for isa, w in widths)]


def _akg_pch(cmd, salt):
    """Flags that include the prelude's system headers precompiled: parsing them (immintrin.h the most) is
    most of a small module's compile. Built once per compiler, flags and CPU into akg's toolchain cache;
    gcc uses it only where it fits the command (else it reads the header); any failure compiles without it."""
    try:
        version = _subprocess.run([cmd[0], "--version"], capture_output=True, text=True, timeout=30).stdout
        key = _hashlib.sha256((_AKG_PCH_HEADER + version + " ".join(cmd) + salt).encode()).hexdigest()[:20]
        base = _os.environ.get("AKG_TOOLCHAIN_CACHE") or _os.path.join(
            _os.environ.get("AKG_CACHE_DIR", _Path.home() / ".cache" / "akg"), "toolchain")
        root = _Path(base) / "cpp-pch" / key
        hdr, pch = root / "akg_cpp.h", root / "akg_cpp.h.gch"
        if not pch.exists():
            root.mkdir(parents=True, exist_ok=True)
            tag = f"{_os.getpid()}.{_threading.get_ident()}"  # concurrent builds never share a file
            (root / f"akg_cpp.h.{tag}").write_text(_AKG_PCH_HEADER)
            _os.replace(root / f"akg_cpp.h.{tag}", hdr)
            _subprocess.run([cmd[0], *(c for c in cmd[1:] if c != "-shared"), "-x", "c++-header", str(hdr), "-o",
                             str(root / f"akg_cpp.h.gch.{tag}")], check=True, capture_output=True, timeout=300)
            _os.replace(root / f"akg_cpp.h.gch.{tag}", pch)
        return ["-include", str(hdr)]
    except Exception:  # noqa: BLE001 - the precompiled header only saves time
        return []


_AKG_CMD, _AKG_CPU = ["g++", *_AKG_FLAGS, *_akg_mvec(), *_akg_pyext(_AKG_SOURCE)], _akg_cpu()
_AKG_LIB = _akg_extension(
    _akg_compile(_AKG_SOURCE, _AKG_CMD, ".cpp", "cpp", _AKG_CPU, lambda: _akg_pch(_AKG_CMD, _AKG_CPU)))
'''


def _elementwise(k: Kernel, s: Schedule, target: HardwareModel) -> list[str]:
    """Pointwise and reduce kernels: a parallel loop over the outputs, reductions as serial loops."""
    if k.kind == "pointwise" and len(k.coords) >= 2 and k.coords[-1].extent >= ROW_LOOP_MIN and \
            math.prod(v.extent for v in k.coords[:-1]) >= 8 and not size_args(k):
        t = transposed_coord(k) if interior(k) is None and not k.also else None
        return transposed_tiles(k, s, t) if t is not None else rows_then_columns(k, s)
    merged = merged_columns(k) if k.kind == "pointwise" and not size_args(k) and interior(k) is None else 0
    if merged and math.prod(v.extent for v in k.coords[:-merged]) >= 8:
        return rows_then_columns(k, s, merged)
    p = CPrinter(STYLE, {}, indent="        ")
    p.identity = (tuple(v.name for v in k.coords), k.out.shape, "akg_i")
    decode([(v.name, v.extent) for v in k.coords], "akg_i", p)
    val = p(k.expr)
    if streamed(k, s) and not k.also:
        return parallel(s, blocks(k.out.numel, "out", lambda ind: [
            f"{ind}#pragma omp simd", f"{ind}for (int64_t akg_i = akg_cb; akg_i < akg_ce; ++akg_i) {{",
            *(ind + ln for ln in p.lines), f"{ind}    akg_buf[akg_i - akg_cb] = {STYLE.store(k.out.dtype, val)};",
            f"{ind}}}"], "    "))
    parts = uniform_select(k)
    if parts is not None:  # a select with one costly arm: tested per block first
        return render_uniform(k, s, parts)
    # pointwise iterations are independent: `simd` lets gcc vectorise them, vector math included
    head = omp(s).replace("parallel for", "parallel for simd") if k.kind == "pointwise" else omp(s)
    also = [f"        {b.name}[akg_i] = {STYLE.store(b.dtype, p(e))};" for b, e in k.also]
    return [head, f"    for (int64_t akg_i = 0; akg_i < {k.out.numel}; ++akg_i) {{", *p.lines,
            f"        out[akg_i] = {STYLE.store(k.out.dtype, val)};", *also, "    }"]


def _rownorm(k: Kernel, s: Schedule, target: HardwareModel) -> list[str]:
    """Per row (in parallel): its reductions once, innermost first, then a vectorisable sweep over
    the columns writing the output (streamed past the caches in blocks, with `stream`)."""
    row_c, cols = row_coords(k)
    rows, n = math.prod(v.extent for v in row_c), math.prod(e for _, e in cols)
    loop = [f"    for (int64_t akg_row = 0; akg_row < {rows}; ++akg_row) {{"]
    p = CPrinter(STYLE, {}, indent="        ")
    decode([(v.name, v.extent) for v in row_c], "akg_row", p)
    stream = streamed(k, s) and rows_lead(k)  # the output's row at akg_row * n
    cache_terms(k, p, cols)  # a softmax's terms: once per element, kept for the sweep
    pre, fixed = precompute(column_values(k, cols), cols, n)  # the columns' own values, once
    p.fixed.update(fixed)
    segments = segmented_columns(k, cols, STREAM_BLOCK if stream else 1)
    if not stream and not segments:
        body = row_sweep(STYLE, k, p, cols, f"for (int64_t akg_col = 0; akg_col < {n}; ++akg_col) {{",
                         Sweep("#pragma omp simd", hoist=True))
        return [*pre, omp(s), *loop, *body, "    }"]
    # the row's values, then its columns in blocks [akg_cb, akg_ce): streamed ones, or one segment of the last
    # column coordinate each
    body = row_sweep(STYLE, k, p, cols, "for (int64_t akg_col = akg_cb; akg_col < akg_ce; ++akg_col) {",
                     Sweep("#pragma omp simd", hoist=True, store_to="akg_buf[akg_col - akg_cb]" if stream else None,
                           segment="akg_cb" if segments else ""))
    row, sweep = body[:len(p.lines)], ["    " + ln for ln in body[len(p.lines):]]
    if stream:
        cols_out = blocks(n, f"out + akg_row * {n}", lambda ind: sweep, p.indent)
        return [*pre, *parallel(s, [*loop, *row, *cols_out, "    }"])]
    step = cols[-1][1]
    return [*pre, omp(s), *loop, *row, f"{p.indent}for (int64_t akg_cb = 0; akg_cb < {n}; akg_cb += {step}) {{",
            f"{p.indent}    const int64_t akg_ce = akg_cb + {step};", *sweep, f"{p.indent}}}", "    }"]


STACK_ACC = 2048  # contiguous outputs whose accumulators live on the stack (16 KB of doubles)


def _strided_ok(k: Kernel) -> list[Reduce] | None:
    """The top-level reductions of a kernel that reduces along a non-contiguous axis, reading along its
    last coordinate (a sum over a middle axis, a norm over channels, an argmax over dim 1); None where the
    strided template does not apply (nested reductions, integer values, a load inside a reduction whose
    innermost index is not the last coordinate)."""
    if k.kind != "reduce" or not k.coords or size_args(k) or not strided_reduction(k) or k.coords[-1].extent < 8:
        return None
    reds = k.reductions()
    inner = {id(x) for r in reds for x in walk(r.body) if isinstance(x, Reduce)}
    tops = [r for r in reds if id(r) not in inner]
    last = k.coords[-1].name
    loads = [e for r in tops for e in walk(r.body) if isinstance(e, Load) and len(e.index) > 1]
    # integer values stay with the plain template's int64 accumulators (a double holds 53 bits)
    if inner or any(r.op not in ("sum", "max", "min", "prod", "argmax", "argmin") or r.body.dtype not in FLOATS
                    for r in tops) or \
            not all(isinstance(e.index[-1], Var) and e.index[-1].name == last for e in loads):
        return None
    return tops


def _strided(k: Kernel, s: Schedule) -> list[str]:
    """Per outer output (in parallel): one double accumulator per contiguous output (and an index, for an
    arg- reduction), the reduction loop outside and the contiguous outputs inside (a SIMD loop reading
    neighbouring elements), then the epilogue over the row of outputs. The plain template reads one
    element per output per step (an argmax over 4096 rows of stride 4095: 1% of speed-of-light)."""
    tops = _strided_ok(k)
    assert tops is not None
    *outer, inner = k.coords
    n_in, n_out = inner.extent, math.prod(v.extent for v in outer)
    out = [omp(s), f"    for (int64_t akg_o = 0; akg_o < {n_out}; ++akg_o) {{"]
    p = CPrinter(STYLE, {}, indent="        ")
    decode([(v.name, v.extent) for v in outer], "akg_o", p)
    out += p.lines
    fixed: dict[int, str] = {}
    for i, r in enumerate(tops):
        acc = f"akg_acc{i}"
        init = {"sum": "0.0", "prod": "1.0"}.get(r.op) or STYLE.inf(r.op in ("max", "argmax"), "double")
        arrays = [(acc, "double", init)] + ([(f"{acc}_i", "int64_t", "0")] if r.op.startswith("arg") else [])
        for name, ty, first in arrays:
            if n_in <= STACK_ACC:  # on the stack: no allocation per outer output
                out += [f"        {ty} {name}[{n_in}];", f"        for (int64_t akg_c = 0; akg_c < {n_in}; ++akg_c) "
                        f"{name}[akg_c] = {first};"]
            else:
                out += [f"        std::vector<{ty}> {name}_v({n_in}, {first});",
                        f"        {ty}* {name} = {name}_v.data();"]
        ext = math.prod(v.extent for v in r.axes)
        out.append(f"        for (int64_t akg_j = 0; akg_j < {ext}; ++akg_j) {{")
        pr = CPrinter(STYLE, dict(p.env), prefix=f"r{i}_", indent="            ")
        stride = 1
        for v in reversed(r.axes):
            pr.env[v.name] = v.name
            pr.emit(f"const int64_t {v.name} = (akg_j / {stride}) % {v.extent};")
            stride *= v.extent
        ahead = next_row_prefetches(r, inner, n_in, pr.flat_index, STYLE.prefetch_bytes, "            ")
        out += pr.lines + ahead
        out += ["            #pragma omp simd", f"            for (int64_t akg_c = 0; akg_c < {n_in}; ++akg_c) {{"]
        pb = CPrinter(STYLE, dict(pr.env, **{inner.name: "akg_c"}), prefix=f"b{i}_", indent="                ")
        b = pb(r.body)
        out += pb.lines
        upd = {"sum": f"{acc}[akg_c] += (double)({b});", "prod": f"{acc}[akg_c] *= (double)({b});",
               "max": f"{acc}[akg_c] = ((double)({b}) > {acc}[akg_c] || ({b}) != ({b})) ? (double)({b}) : "
                      f"{acc}[akg_c];",
               "min": f"{acc}[akg_c] = ((double)({b}) < {acc}[akg_c] || ({b}) != ({b})) ? (double)({b}) : "
                      f"{acc}[akg_c];"}
        if r.op.startswith("arg"):  # torch's: the first NaN wins, an equal value does not (the first index kept)
            cmp = ">" if r.op == "argmax" else "<"
            upd[r.op] = (f"const double akg_x = (double)({b}); const bool akg_w = akg_x {cmp} {acc}[akg_c] || "
                         f"(akg_x != akg_x && {acc}[akg_c] == {acc}[akg_c]); {acc}[akg_c] = akg_w ? akg_x : "
                         f"{acc}[akg_c]; {acc}_i[akg_c] = akg_w ? akg_j : {acc}_i[akg_c];")
        out += [f"                {upd[r.op]}", "            }", "        }"]
        got = f"{acc}_i[akg_c]" if r.op.startswith("arg") else f"{acc}[akg_c]"
        fixed[id(r)] = f"(({STYLE.ctype_compute(r.dtype)}){got})"
    out += ["        #pragma omp simd", f"        for (int64_t akg_c = 0; akg_c < {n_in}; ++akg_c) {{"]
    pe = CPrinter(STYLE, dict(p.env, **{inner.name: "akg_c"}), prefix="e", indent="            ")
    pe.fixed = fixed
    val = pe(k.expr)
    also = [f"            {b.name}[akg_o * {n_in} + akg_c] = {STYLE.store(b.dtype, pe(e))};" for b, e in k.also]
    out += pe.lines + [f"            out[akg_o * {n_in} + akg_c] = {STYLE.store(k.out.dtype, val)};", *also,
                       "        }", "    }"]
    return out


def _reduce(k: Kernel, s: Schedule, target: HardwareModel) -> list[str]:
    return _strided(k, s) if _strided_ok(k) is not None else _elementwise(k, s, target)


GEMM_SCHEDULE = {"MR": 8, "NR": 32, "NB": 256, "KC": 256, "COLS_OUTER": 0}
COLS_OUTER_ROWS = 512  # at most this many rows: column blocks outside by default


def gemm_schedule(target: HardwareModel) -> Schedule:
    """The register tile from the host's SIMD width: two vectors per row, as many rows as the vector
    registers hold beside the B vectors and a broadcast (AVX-512: 12 x 32 floats in 24 of 32 registers;
    AVX2: 6 x 16 in 12 of 16): each B vector loaded from the panel (streamed from L2) feeds MR FMAs.
    Measured here (AVX-512, 2 cores, 512x1024x1024 linear+relu): 4 x 16 20.3 ms, 6 x 32 8.7 ms, 8 x 32
    7.0 ms; with the panel prefetched (1024 x 2048 x 2048 linear): 8 x 32 13.99 ms, 12 x 32 11.65 ms
    (14 x 32 spills: slower)."""
    lanes = _lanes(target)
    return Schedule(GEMM_SCHEDULE, MR=12 if lanes >= 16 else 6, NR=2 * max(lanes, 4))


def _lanes(target: HardwareModel) -> int:
    try:
        return int(target.chip("simd_width"))
    except KeyError:
        return 8


def cols_outer(rows: int, kk: int, nb: int, target: HardwareModel) -> bool:
    """Column blocks outside: a thread's consecutive row blocks share one packed panel of B (K x NB),
    which stays in L2 across them if it fits in half of it (A's panel and the accumulators take the rest);
    rows outside stream all of B once per row block of MR rows, 2 * MR FLOPs a loaded float. Where the
    panel does not fit, columns outside still win for few rows (batch-sized) and lose for a square GEMM
    (benchmarks/results/archive/cpu-cpp-gemm-block-order-*.json, an AVX2 host with 512 KiB of L2)."""
    return rows <= COLS_OUTER_ROWS or 4 * kk * nb <= target.chip("local_mem_per_group_bytes") / 2


def gemm_default(k: Kernel, target: HardwareModel) -> Schedule:
    """`gemm_schedule`, with the block order of `cols_outer`; a batched GEMM's MR divides a batch's rows,
    so its blocks share one B and take the vector tile."""
    if small_m(k):
        return small_m_default(k, target)
    if one_column(k):
        return Schedule()
    g = split_gemm(k)
    per_batch = math.prod(e for _, e in g.rows)
    s = gemm_schedule(target)
    s = s.replace(COLS_OUTER=int(cols_outer(per_batch * math.prod(e for _, e in g.batch), g.k.extent, s["NB"], target)))
    mr = s["MR"]
    if g.batch and per_batch % mr:  # blocks across batches take the scalar tile: fewer rows a block instead,
        # down to 4 rows or half the tile (a thinner one reloads B for too few rows; a batch of 13 rows keeps the
        # scalar one)
        low = min((mr + 1) // 2, 4)
        s = s.replace(MR=next((m for m in range(mr - 1, low - 1, -1) if per_batch % m == 0), mr))
    return s


def _matmul(k: Kernel, s: Schedule, target: HardwareModel) -> list[str]:
    """Few rows: the streaming template of gemv.py. Otherwise blocked and packed: B packed once per call
    (prologue applied once per element, in strips of NR columns along K);
    then in parallel over blocks of MR rows x NB columns, K swept in KC-deep panels: the panel's A
    values packed first (the prologue once per element and column block), then MR x NR register tiles
    accumulate the panel in the compute type and add it into the block's double accumulators (fp32
    rounding over KC terms at most, not K); epilogue fused at the block's end."""
    if small_m(k):
        return render_small_m(k, s)
    if one_column(k):
        return _reduce(k, s, target)
    g = split_gemm(k)
    dot, a_e, kv, n_vars = g.dot, g.a, g.k, g.cols
    if not n_vars:  # both operands index every output coordinate (a reshaped epilogue over run-time sizes)
        raise UnsupportedKernel(f"{k.name}: its GEMM's columns cannot be told from its rows (an epilogue reshape "
                                f"over run-time sizes); leave GEMMs to torch with --library gemm")
    row_vars = [(v.name, v.extent) for v in k.coords if (v.name, v.extent) not in n_vars]  # batch, then rows
    rows, n, kk = math.prod(e for _, e in row_vars), math.prod(e for _, e in n_vars), kv.extent
    batches = math.prod(e for _, e in g.batch)
    sched = {**GEMM_SCHEDULE, **{a: b for a, b in s.items() if a in GEMM_SCHEDULE}}
    mr, nr, kc = sched["MR"], sched["NR"], min(sched["KC"], kk)
    nb = min(-(-sched["NB"] // nr) * nr, n)
    bt, ct, pair = pack.packed_type(g), STYLE.ctype_compute(k.out.dtype), pack.bf16_pairs(g)
    # B packed in strips of NR columns, each strip's K rows one after another (a register tile then reads
    # its panel as one stream, not NR values from each of KC rows a row of B apart, which alias in the cache
    # when that row is a power of two long); packed in PACK x PACK tiles, so a weight stored transposed (a
    # linear's [N, K]) is read along K inside a tile that stays in L1
    kp, npad = batches * kk, -(-n // nr) * nr
    cached = bool(weight_bufs(k))
    gathered = not reads_along(a_e, row_vars[-1][0])  # A packed row by row: its index decoded per element
    ga = pack.gathered_a(a_e, kv, row_vars) if gathered else None
    a_e, tables = (ga.a, ga.lines) if ga else (a_e, [])
    # a block of rows inside the input reads A in place (the fp32 vector tile over one B); else it packs
    shared_b = batches == 1 or _blocks_inside_batches(row_vars, g.batch, mr)
    vec = vector_width(nr, _lanes(target))
    if ga and ga.direct and not (shared_b and ct == bt == "float" and vec):
        ga = dataclasses.replace(ga, direct=None)
    direct = pack.direct_setup(ga, kv.name, kk, row_vars, mr, rows) if ga and ga.direct else ([], [])
    tables = tables + direct[0]
    out = [*tables, f"    std::vector<{bt}> akg_own;", f"    {bt}* akg_bp = akg_bpc;"] if cached else \
        [*tables, f"    {bt}* akg_bp = akg_pack_scratch<{bt}>({kp * npad});"]
    if cached:  # the module's copy, packed by an earlier call: checked where a write could hide from torch
        out += pack_check(g, n, nr, bt)
    out += [*(["    if (akg_fresh || akg_stale) {"] if cached else []),
            omp(s).replace("parallel for", "parallel for collapse(2)"), *pack_loops(g, n, nr, bt)]
    out += ["    }"] if cached else []
    bflat = "0"
    for name, ext in g.batch:
        bflat = f"({bflat} * {ext} + {name})"
    nrb, ncb = -(-rows // mr), -(-n // nb)
    # COLS_OUTER: a thread's consecutive blocks share one panel of packed B (K x NB), kept in cache across
    # the row blocks; else they share a panel of A, and the panels of B pass by in turn
    blocks = [f"    for (int64_t akg_rb = 0; akg_rb < {nrb}; ++akg_rb) {{",
              f"    for (int64_t akg_cb = 0; akg_cb < {ncb}; ++akg_cb) {{"]
    out += [omp(s).replace("parallel for", "parallel for collapse(2)"),
            *(blocks[::-1] if sched["COLS_OUTER"] else blocks),
            f"        const int64_t akg_n0 = akg_cb * {nb}, akg_nw = std::min<int64_t>({nb}, {n} - akg_n0);",
            f"        double akg_acc[{mr}][{nb}] = {{}};",
            f"        {bt if pair else ct} akg_ap[{mr}][{kc}];",  # bf16 pairs: A's bits too
            f"        const {bt}* akg_b[{mr}];", *direct[1],
            f"        for (int64_t akg_k0 = 0; akg_k0 < {kk}; akg_k0 += {kc}) {{",
            f"            const int64_t akg_kw = std::min<int64_t>({kc}, {kk} - akg_k0);",
            f"            for (int akg_i = 0; akg_i < {mr}; ++akg_i) {{",
            f"                const int64_t akg_row = akg_rb * {mr} + akg_i;",
            f"                if (akg_row >= {rows}) {{ akg_b[akg_i] = akg_bp; "
            f"for (int64_t q = 0; q < akg_kw; ++q) akg_ap[akg_i][q] = 0; continue; }}"]
    p = CPrinter(STYLE, {}, indent="                ")
    decode(row_vars, "akg_row", p)
    p.emit(f"akg_b[akg_i] = akg_bp + {bflat} * {kk * npad};")
    out += p.lines
    if not gathered:  # A stored transposed: its panel packed along its stored rows
        out += pack.pack_a_by_k(a_e, kv.name, row_vars, mr, rows, pair)
    else:
        assert ga is not None
        out += pack.gathered_pack(ga, kv.name, p.env, pair)
    # the register tile: MR x NR accumulators kept in registers over a panel (fixed trip counts the
    # compiler unrolls), then added into the block's double accumulators; a column tail takes the
    # plain loop. One B pointer for every row unless rows of one block can lie in different batches.
    brow = "akg_b[0]" if shared_b else "akg_b[akg_i]"
    out += [f"            for (int64_t akg_j0 = 0; akg_j0 < akg_nw; akg_j0 += {nr}) {{",
            f"                if (akg_j0 + {nr} <= akg_nw) {{"]
    step = "2 * " if pair else ""  # a column's next value in a packed row
    a_at = pack.panel_float("akg_ap[akg_i][akg_q]", pair)
    if ga and ga.direct:  # the column tail of a block read in place
        a_at = f"(akg_direct ? {pack.direct_at(ga, 'akg_i')} : {a_at})"
    tail_at = pack.packed_at(kk, nr, pair, f"(akg_n0 + akg_j) / {nr}", "akg_k0 + akg_q", f"(akg_n0 + akg_j) % {nr}")
    if shared_b and ct == "float" and vec and pair and kc % 2 == 0:
        out += pair_tile(mr, nr, kk, vec)
    elif ga and ga.direct:
        out += ["                    if (akg_direct) {", *vector_tile(mr, nr, kk, vec, lambda i: pack.direct_at(ga, i)),
                "                    } else {", *vector_tile(mr, nr, kk, vec), "                    }"]
    elif shared_b and ct == bt == "float" and vec:
        out += vector_tile(mr, nr, kk, vec)
    else:
        out += [f"                    {ct} akg_c[{mr}][{nr}] = {{}};",
                "                    for (int64_t akg_q = 0; akg_q < akg_kw; ++akg_q) {",
                f"                        for (int akg_i = 0; akg_i < {mr}; ++akg_i) {{",
                f"                            const {ct} akg_a = {a_at};",
                f"                            const {bt}* akg_br = {brow} + "
                f"{pack.packed_at(kk, nr, pair, f'(akg_n0 + akg_j0) / {nr}', 'akg_k0 + akg_q', '0')};",
                f"                            for (int akg_jj = 0; akg_jj < {nr}; ++akg_jj) "
                f"akg_c[akg_i][akg_jj] += akg_a * ({ct}){pack.panel_float(f'akg_br[{step}akg_jj]', pair)};",
                "                        }", "                    }",
                f"                    for (int akg_i = 0; akg_i < {mr}; ++akg_i)",
                f"                        for (int akg_jj = 0; akg_jj < {nr}; ++akg_jj) "
                "akg_acc[akg_i][akg_j0 + akg_jj] += akg_c[akg_i][akg_jj];"]
    out += ["                } else {",
            "                    for (int64_t akg_q = 0; akg_q < akg_kw; ++akg_q)",
            f"                        for (int akg_i = 0; akg_i < {mr}; ++akg_i) {{",
            f"                            const double akg_a = (double){a_at};  // once per row, not per column",
            "                            for (int64_t akg_j = akg_j0; akg_j < akg_nw; ++akg_j)",
            "                                akg_acc[akg_i][akg_j] += akg_a * "
            f"(double){pack.panel_float(f'{brow}[{tail_at}]', pair)};",
            "                        }", "                }", "            }", "        }",
            f"        for (int akg_i = 0; akg_i < {mr}; ++akg_i) {{",
            f"            const int64_t akg_row = akg_rb * {mr} + akg_i;",
            f"            if (akg_row >= {rows}) continue;"]
    pr = CPrinter(STYLE, {}, indent="            ")
    decode(row_vars, "akg_row", pr)
    out += pr.lines
    # the epilogue's columns are independent: `simd` vectorises it, its vector math included
    out += ["            #pragma omp simd", "            for (int64_t akg_j = 0; akg_j < akg_nw; ++akg_j) {",
            "                const int64_t akg_col = akg_n0 + akg_j;"]
    pe = CPrinter(STYLE, dict(pr.env), prefix="e", indent="                ")
    pe.fixed[id(dot)] = f"(({STYLE.ctype_compute(k.out.dtype)})akg_acc[akg_i][akg_j])"
    decode(n_vars, "akg_col", pe, bounded=True)  # akg_col < n: the loop's bound
    val = pe(k.expr)
    out += pe.lines
    strides = k.out.strides()
    flat = " + ".join(f"{v.name} * {s}" if s != 1 else v.name for v, s in zip(k.coords, strides)) or "0"
    out += [f"                out[{flat}] = {STYLE.store(k.out.dtype, val)};", "            }", "        }",
            "    }", "    }"]
    return out + (["    return akg_stale;"] if cached else [])


def _blocks_inside_batches(row_vars: list[tuple[str, int]], batch: list[tuple[str, int]], mr: int) -> bool:
    """Whether every block of MR rows lies inside one batch (the batch axes outermost, a batch's rows a
    multiple of MR): then the block's rows share one packed B and take the vector tile."""
    return {n for n, _ in row_vars[:len(batch)]} == {n for n, _ in batch} and \
        math.prod(e for _, e in row_vars[len(batch):]) % mr == 0


def _threads_space(k: Kernel, target: HardwareModel) -> list[Schedule]:
    # OpenMP's own thread count by default; `akg tune` tries explicit ones, and the other store kind
    first = stream_default(k, target)
    threads = [first] + [first.replace(threads=t) for t in sorted({1, max(1, target.units // 2), target.units})]
    return threads + ([Schedule(stream=not first.get("stream", False))] if streamable(k) else [])


def _gemm_space(k: Kernel, target: HardwareModel) -> list[Schedule]:
    if small_m(k):
        return small_m_space(k, target, _threads_space(k, target))
    if one_column(k):
        return _threads_space(k, target)
    g = split_gemm(k)
    per_batch, mrs = math.prod(e for _, e in g.rows), (2, 4, 6, 8, 12)
    if g.batch and per_batch % gemm_default(k, target)["MR"] == 0:
        mrs = tuple(m for m in mrs if per_batch % m == 0)  # the others' blocks straddle batches: scalar tile
    return [t.replace(MR=mr, NR=nr, NB=nb, KC=kc, COLS_OUTER=co) for t in _threads_space(k, target)
            for mr in mrs for nr in (8, 16, 32) for nb in (128, 256, 512) for kc in (128, 256) for co in (0, 1)]


def _launch(k: Kernel, schedule: Schedule, ref: Ref) -> list[str]:
    args = [f"{ref(b)}.data_ptr()" for b in k.inputs()] + [f"{b.name}.data_ptr()" for b in k.outs()] + [*size_args(k)]
    if weight_bufs(k):
        return pack_launch(k, {**GEMM_SCHEDULE, **schedule}["NR"], args)
    return [f"_AKG_LIB.{k.name}({', '.join(args)})"]


TEMPLATES = {kind: with_width(t, _lanes) for kind, t in {
    "pointwise": Template(kernel(_elementwise), _launch, stream_default, _threads_space),
    "reduce": Template(kernel(_reduce), _launch, space=_threads_space),
    "rownorm": Template(kernel(_rownorm), _launch, stream_default, _threads_space),
    "matmul": Template(kernel(_matmul, pack_params), _launch, gemm_default, _gemm_space),
    "scan": Template(kernel(render_scan), _launch, space=_threads_space),
    "attention": Template(kernel(flash.render_attention), _launch, flash.default_schedule, flash.space),
}.items()}


class CppBackend(BackendBase):
    manifest = MANIFEST
    overrides = STYLE.overrides
    templates = TEMPLATES

    def tiling(self, s: Schedule) -> Tiling | None:
        """A register-blocked GEMM: one thread streaming an MR x KC panel of A and a KC x NR panel of B
        through its MR x NR register tile."""
        return Tiling(block=(s["MR"], s["NR"], s.get("KC", 256)), num_warps=1, num_stages=1) if "MR" in s else None

    def chains(self, prog: KernelProgram, schedules: Schedules) -> list[Chain]:
        return plan_chains(prog, chain.can_chain)

    def render_chain(self, c: Chain, prog: KernelProgram, sources: Mapping[str, str]) -> str:
        return chain.render(c, prog, sources)

    def frame(self, prog: KernelProgram, schedules: Schedules, target: HardwareModel,
              sources: dict[str, str]) -> Frame:
        src = PRELUDE_CPP + "".join(UNIT + text + "\n\n" for text in sources.values())
        py = pyext.bindings(sources.values(), list(sources))  # the kernels and the chains (`chains`)
        src += UNIT + py if py else ""
        # ctypes' argument types: only where the library loaded without its bindings
        argtypes = "".join(f"\n    _AKG_LIB.{k.name}.argtypes = [_ctypes.c_void_p] * {len(k.inputs()) + len(k.outs())}"
                           + (f" + [_ctypes.c_int64] * {len(size_args(k))}" if size_args(k) else "")
                           + (" + [_ctypes.c_void_p, _ctypes.c_int64]" if pack_params(k) else "")
                           for k in prog.kernels())
        kernels = {k.name for k in prog.kernels()}
        argtypes += "".join(f"\n    _AKG_LIB.{name}.argtypes = [_ctypes.c_void_p] * {chain.arity(name, text)}"
                            for name, text in sources.items() if name not in kernels)
        argtypes = "if isinstance(_AKG_LIB, _ctypes.CDLL):" + argtypes if argtypes else ""
        head = (f"_AKG_SOURCE = r'''{src}'''\n_AKG_VECTOR_MATH = {VECTOR_MATH!r}\n"
                f"_AKG_PCH_HEADER = {PCH_HEADER!r}\n")
        runtime = PACK_RUNTIME if any(pack_params(k) for k in prog.kernels()) else ""
        return Frame([], head + BUILD + runtime + argtypes + "\n", {})


BACKEND = CppBackend()
