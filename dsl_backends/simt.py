"""SIMT kernel layouts shared by the GPU dialects of the C-style renderer (CUDA-C, Metal): pointwise
grid-stride loops, one thread group per reduced output (per-thread partials, then a group-wide
combine), and a shared-memory tiled GEMM. A Dialect names the few things that differ: the shared
memory qualifier, the barrier, the thread and group indices."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ir.kernel.analysis import GemmParts, same_renamed, split_gemm
from ir.kernel.ir import Expr, Kernel, Load, Reduce, Var, free_vars
from ir.kernel.schedule import Schedule
from ir.sym import is_dynamic

from .cstyle import CPrinter, CStyle, decode
from .exprs import fold_grid, row_coords, strided_reduction
from .sweep import Sweep, row_sweep

REDUCE_OPS = {"sum": 0, "dot": 0, "prod": 1, "max": 2, "min": 3}  # the preludes' akg_combine<OP>


@dataclass(frozen=True)
class Dialect:
    shared: str  # qualifier of group-shared arrays
    sync: str  # a barrier across the group
    block: str  # the group's index (a 3-vector)
    thread: str  # the thread's index in its group
    block_dim: str  # threads per group
    grid_dim: str  # groups in the grid
    lane_args: str = ""  # extra arguments the prelude's group reductions need


# A row's elements each thread keeps in registers between sweeps: at most this many per thread and sweep,
# and in all (a softmax's row of 4096 at 256 threads: 16)
KEEP_PER_SWEEP, KEEP_IN_ALL = 32, 64


@dataclass
class _Kept:
    """A load of a sweep whose value each thread keeps, element `k` of its own array `arr`."""
    load: Load
    axes: tuple[tuple[str, int], ...]
    arr: str
    steps: int


@dataclass
class _Sweep:
    """A sweep over a row in registers-sized steps: the unrolled step variable, how many, what it keeps
    (the row printer's list), where the arrays are declared (before the loop, in the row's scope)."""
    k: str
    steps: int
    axes: tuple[tuple[str, int], ...]
    kept: list[_Kept]
    row: list[str] | None  # the row scope's lines, where its arrays are declared (None: the sweep only reads
    at: int  # them, as the output's columns do); `at`: the index of the sweep's loop there
    indent: str = ""


def group_printer(d: Dialect, threads: int = 0) -> type[CPrinter]:
    """A printer whose reductions a group's `threads` threads share. Where a row fits in registers
    (at most KEEP_PER_SWEEP elements a thread), each sweep is unrolled and what it loads is kept, so a
    later sweep of the same row (a variance after its mean, a softmax's sum after its maximum, the
    output's columns) reads registers, not memory."""

    class GroupPrinter(CPrinter):
        parallel = True

        def __init__(self, *a: Any, **kw: Any) -> None:
            super().__init__(*a, **kw)
            self.kept: list[_Kept] = []  # this row scope's kept loads
            self.sweep: _Sweep | None = None  # set on the printer of a sweep's body
            self.opening: tuple[str, int] | None = None

        def steps(self, ext: int) -> int:
            if not threads or not isinstance(ext, int) or is_dynamic(ext):  # a run-time size: the strided loop
                return 0
            n = -(-ext // threads)
            return n if 0 < n <= KEEP_PER_SWEEP else 0

        def unrolled(self, j: str, ext: int, k: str) -> str:
            ind = self.indent + "    "
            guard = f"\n{ind}if ({j} >= {ext}) break;" if ext % threads else ""
            return (f"#pragma unroll\n{self.indent}for (int {k} = 0; {k} < {self.steps(ext)}; ++{k}) {{\n"
                    f"{ind}const int64_t {j} = (int64_t){d.thread}.x + {k} * {threads};{guard}")

        def loop_header(self, j: str, ext: int, parallel: bool) -> str:
            if parallel and self.steps(ext):
                self.opening = (self.fresh(), len(self.lines))
                return self.unrolled(j, ext, self.opening[0])
            if parallel:  # unrolled by 4: each thread has four loads in flight, not one (long rows)
                return (f"#pragma unroll 4\n{self.indent}"
                        f"for (int64_t {j} = {d.thread}.x; {j} < {ext}; {j} += {d.block_dim}.x) {{")
            return super().loop_header(j, ext, parallel)

        def open_sweep(self, inner: CPrinter, axes: tuple[Var, ...]) -> None:
            if self.opening is not None and isinstance(inner, GroupPrinter):
                k, at = self.opening
                ext = math.prod(v.extent for v in axes)
                inner.sweep = _Sweep(k, self.steps(ext), tuple((v.name, v.extent) for v in axes), self.kept,
                                     self.lines, at, self.indent)
                self.opening = None

        def online(self, m: Reduce, s: Reduce) -> None:
            """A row too long to keep: each thread sweeps its elements once for both the maximum and the
            sum of exp(x - maximum), rescaling its sum when its maximum grows (an element of -inf adds
            0); the group's maximum, then each thread's sum rescaled to it, then the group's sum."""
            ext = math.prod(v.extent for v in m.axes)
            if self.steps(ext) or m.body.dtype != "f32":
                return  # kept in registers, the second sweep reads no memory
            exp, ninf = self.s.fn("exp", "float"), self.s.inf(True, "float")
            mx, sm, j, top = self.fresh(), self.fresh(), self.fresh(), self.fresh()
            self.emit(f"float {mx} = {ninf};")
            self.emit(f"float {sm} = 0;")
            self.emit(self.loop_header(j, ext, True))
            inner = self.scope(self.env, self.indent + "    ")
            inner.parallel = False
            decode([(v.name, v.extent) for v in m.axes], j, inner)
            e = inner(m.body)
            inner.emit(f"if ({e} > {mx} || {e} != {e}) {{ {sm} *= {exp}({mx} - {e}); {mx} = {e}; }}")
            inner.emit(f"if ({e} != {ninf}) {sm} += {exp}({e} - {mx});")
            self.lines += inner.lines
            self.emit("}")
            self.emit(f"float {top} = {mx};")
            self.combine_threads("max", top)
            self.emit(f"if ({mx} != {ninf}) {sm} *= {exp}({mx} - ({top} == {ninf} ? 0.0f : {top}));")
            self.combine_threads("sum", sm)
            self.names[id(m)], self.names[id(s)] = top, sm

        def column_loop(self, cols: list[tuple[str, int]], header: str, indent: str) -> tuple[str, CPrinter]:
            n = math.prod(e for _, e in cols)
            if not self.kept or not self.steps(n):
                header, body = super().column_loop(cols, header, indent)
                return f"#pragma unroll 4\n{self.indent}{header}", body
            k = self.fresh()
            body = GroupPrinter(self.s, self.env, prefix="u", indent=indent)
            body.parallel = False
            body.sweep = _Sweep(k, self.steps(n), tuple(cols), self.kept, None, 0)
            return self.unrolled("akg_col", n, k), body

        def __call__(self, e: Expr) -> str:
            sw = self.sweep
            if sw is None or not isinstance(e, Load) or id(e) in self.names or id(e) in self.fixed:
                return super().__call__(e)
            for kept in sw.kept:
                ren = {a: b for (a, _), (b, _) in zip(sw.axes, kept.axes)}
                if [x for _, x in kept.axes] == [x for _, x in sw.axes] and same_renamed(kept.load, e, ren):
                    self.names[id(e)] = f"{kept.arr}[{sw.k}]"
                    return self.names[id(e)]
            name = super().__call__(e)
            mine = {a for a, _ in sw.axes}
            room = KEEP_IN_ALL - sum(x.steps for x in sw.kept)
            if sw.row is not None and free_vars(e) & mine and room >= sw.steps:
                arr = f"akg_keep{len(sw.kept)}"
                sw.kept.append(_Kept(e, sw.axes, arr, sw.steps))
                sw.row.insert(sw.at, f"{sw.indent}{self.s.ctype_compute(e.dtype)} {arr}[{sw.steps}];")
                self.emit(f"{arr}[{sw.k}] = {name};")
            return name

        def combine_threads(self, op: str, acc: str) -> None:
            if op in ("argmax", "argmin"):
                arg = int(op == "argmax")
                self.emit(f"akg_block_arg<{arg}>({acc}, {acc}_i, akg_smem, akg_smem_i{d.lane_args});")
            else:
                self.emit(f"{acc} = akg_block_reduce<{REDUCE_OPS[op]}>({acc}, akg_smem{d.lane_args});")

    return GroupPrinter


def _mm_tile(s: Schedule) -> tuple[int, int, int, int, int]:
    bm, bn, bk, tm, tn = (int(s.get(x, d)) for x, d in (("BM", 64), ("BN", 64), ("BK", 16), ("TM", 4), ("TN", 4)))
    return bm, bn, bk, tm, tn


def launch_dims(k: Kernel, s: Schedule) -> tuple[tuple[int, int, int], int]:
    """Groups (x, y, z) and threads per group of the SIMT layout `body_lines` writes for `k`: one
    analysis of the kernel IR and the schedule (the launch never renders the body)."""
    groups = int(s.get("GROUPS", 1 << 20))
    if k.kind == "matmul":
        g = split_gemm(k)
        rows, n = math.prod(e for _, e in g.rows), math.prod(e for _, e in g.cols)
        bm, bn, _, tm, tn = _mm_tile(s)
        return gemm_grid(s, -(-n // bn), -(-rows // bm), math.prod(e for _, e in g.batch)), (bm // tm) * (bn // tn)
    if k.kind in ("reduce", "rownorm"):
        threads = int(s.get("THREADS", 256))
        row_c = k.coords if k.kind == "reduce" else row_coords(k)[0]
        rows = math.prod(v.extent for v in row_c)
        if strided_reduction(k):  # a thread per row
            return (min(-(-rows // threads), groups), 1, 1), threads
        return (min(rows, groups), 1, 1), threads  # a group per row
    block = int(s.get("BLOCK", 256))
    return (min(-(-k.out.numel // block), groups), 1, 1), block


def body_lines(k: Kernel, s: Schedule, style: CStyle, d: Dialect) -> list[str]:
    """The kernel body of the layout for its kind (launched with `launch_dims`)."""
    n = k.out.numel
    if k.kind == "matmul":
        return matmul_lines(k, s, style, d)
    if k.kind == "reduce" and strided_reduction(k):
        return thread_rows(k, style, d, k.coords, [])
    if k.kind == "reduce":
        lines = [f"    {d.shared} int64_t akg_smem[32];  // 8-byte slots: any accumulator type",
                 f"    {d.shared} int64_t akg_smem_i[32];",
                 f"    for (int64_t akg_i = {d.block}.x; akg_i < {n}; akg_i += {d.grid_dim}.x) {{"]
        p = group_printer(d, int(s.get("THREADS", 256)))(style, {}, indent="        ")
        decode([(v.name, v.extent) for v in k.coords], "akg_i", p)
        val = p(k.expr)
        stores = [f"out[akg_i] = {style.store(k.out.dtype, val)};"] + [
            f"{b.name}[akg_i] = {style.store(b.dtype, p(e))};" for b, e in k.also]
        lines += p.lines
        first = stores[0] if len(stores) == 1 else f"{{ {' '.join(stores)} }}"
        return lines + [f"        if ({d.thread}.x == 0) {first}", "    }"]
    if k.kind == "rownorm":
        return rownorm_lines(k, s, style, d)
    lines = [f"    for (int64_t akg_i = (int64_t){d.block}.x * {d.block_dim}.x + {d.thread}.x; akg_i < {n}; "
             f"akg_i += (int64_t){d.grid_dim}.x * {d.block_dim}.x) {{"]
    p = CPrinter(style, {}, indent="        ")
    decode([(v.name, v.extent) for v in k.coords], "akg_i", p)
    val = p(k.expr)
    lines += p.lines
    return lines + [f"        out[akg_i] = {style.store(k.out.dtype, val)};", "    }"]


def rownorm_lines(k: Kernel, s: Schedule, style: CStyle, d: Dialect) -> list[str]:
    """A row-fused kernel: one group per row computes the row's reductions together (every thread gets
    each result), then its threads stride over the columns writing the output."""
    row_c, cols = row_coords(k)
    rows, n = math.prod(v.extent for v in row_c), math.prod(e for _, e in cols)
    if strided_reduction(k):
        return thread_rows(k, style, d, row_c, cols)
    lines = [f"    {d.shared} int64_t akg_smem[32];  // 8-byte slots: any accumulator type",
             f"    {d.shared} int64_t akg_smem_i[32];",
             f"    for (int64_t akg_row = {d.block}.x; akg_row < {rows}; akg_row += {d.grid_dim}.x) {{"]
    p = group_printer(d, int(s.get("THREADS", 256)))(style, {}, indent="        ")
    decode([(v.name, v.extent) for v in row_c], "akg_row", p)
    loop = f"for (int64_t akg_col = {d.thread}.x; akg_col < {n}; akg_col += {d.block_dim}.x) {{"
    lines += row_sweep(style, k, p, cols, loop, Sweep(once=f"{d.thread}.x == 0"))
    return lines + ["    }"]


def thread_rows(k: Kernel, style: CStyle, d: Dialect, row_c: tuple, cols: list[tuple[str, int]]) -> list[str]:
    """Rows that neighbour in memory (a norm over channels, a sum over a middle axis): a thread per
    row, its reductions and columns in serial loops, so a warp reads neighbouring elements."""
    rows = math.prod(v.extent for v in row_c)
    lines = [f"    for (int64_t akg_row = (int64_t){d.block}.x * {d.block_dim}.x + {d.thread}.x; akg_row < {rows}; "
             f"akg_row += (int64_t){d.grid_dim}.x * {d.block_dim}.x) {{"]
    p = CPrinter(style, {}, indent="        ")
    decode([(v.name, v.extent) for v in row_c], "akg_row", p)
    if cols:
        n = math.prod(e for _, e in cols)
        lines += row_sweep(style, k, p, cols, f"for (int64_t akg_col = 0; akg_col < {n}; ++akg_col) {{")
    else:  # a plain reduction: one value per row
        val = p(k.expr)
        flat = " + ".join(f"{v.name} * {st}" if st != 1 else v.name for v, st in zip(k.coords, k.out.strides()))
        also = [f"        {b.name}[{flat or '0'}] = {style.store(b.dtype, p(e))};" for b, e in k.also]
        lines += p.lines + [f"        out[{flat or '0'}] = {style.store(k.out.dtype, val)};", *also]
    return lines + ["    }"]


MMA_LOOP = """\
        {sync}
        #pragma unroll
        for (int akg_q = 0; akg_q < {bk}; ++akg_q) {{
            float akg_a[{tm}], akg_b[{tn}];
            #pragma unroll
            for (int akg_x = 0; akg_x < {tm}; ++akg_x) akg_a[akg_x] = akg_As[akg_q][akg_ty * {tm} + akg_x];
            #pragma unroll
            for (int akg_y = 0; akg_y < {tn}; ++akg_y) akg_b[akg_y] = akg_Bs[akg_q][akg_tx * {tn} + akg_y];
            #pragma unroll
            for (int akg_x = 0; akg_x < {tm}; ++akg_x)
                #pragma unroll
                for (int akg_y = 0; akg_y < {tn}; ++akg_y) akg_acc[akg_x][akg_y] += akg_a[akg_x] * akg_b[akg_y];
        }}
        {sync}
    }}"""


def matmul_lines(k: Kernel, s: Schedule, style: Any, d: Dialect) -> list[str]:
    """Shared-memory tiled GEMM: a BMxBN tile of C per block, a TMxTN register tile per thread, the K
    loop in BK steps through shared memory; prologue in the tile loads, epilogue at the store. Locals
    are akg_-prefixed: buffers are named after the program's values (q, k, v, x, ...)."""
    g = split_gemm(k)  # one GEMM per batch: grid z
    rows, n, kk = math.prod(e for _, e in g.rows), math.prod(e for _, e in g.cols), g.k.extent
    bm, bn, bk, tm, tn = _mm_tile(s)
    nthreads = (bm // tm) * (bn // tn)
    out = [f"    {d.shared} float akg_As[{bk}][{bm} + 1];", f"    {d.shared} float akg_Bs[{bk}][{bn} + 1];",
           *tile_origin(s, d.block, (bm, bn), (rows, n), math.prod(e for _, e in g.batch)),
           f"    const int akg_tx = {d.thread}.x % {bn // tn}, akg_ty = {d.thread}.x / {bn // tn};",
           f"    float akg_acc[{tm}][{tn}] = {{}};",
           f"    for (int64_t akg_k0 = 0; akg_k0 < {kk}; akg_k0 += {bk}) {{"]
    out += stage_operands(style, g, (bm, bn, bk), (rows, n), d.thread, nthreads, "akg_As[akg_c][akg_r] = akg_v;",
                          "akg_Bs[akg_r][akg_c] = akg_v;")
    out += MMA_LOOP.format(bk=bk, tm=tm, tn=tn, sync=d.sync).splitlines()
    out += [f"    for (int akg_x = 0; akg_x < {tm}; ++akg_x) {{",
            f"        for (int akg_y = 0; akg_y < {tn}; ++akg_y) {{",
            f"            const int64_t akg_row = akg_row0 + akg_ty * {tm} + akg_x, "
            f"akg_col = akg_col0 + akg_tx * {tn} + akg_y;",
            f"            if (akg_row >= {rows} || akg_col >= {n}) continue;"]
    out += epilogue(style, k, g, "akg_acc[akg_x][akg_y]", "            ") + ["        }", "    }"]
    return out


def gemm_grid(s: Schedule, col_tiles: int, row_tiles: int, batch: int) -> tuple[int, int, int]:
    """A GEMM's launch grid: (column tiles, row tiles, batch), or all three along x where y or z would
    pass the launch limit."""
    if fold_grid(s, row_tiles, batch):
        return col_tiles * row_tiles * batch, 1, 1
    return col_tiles, row_tiles, batch


def tile_origin(s: Schedule, block: str, tile: tuple[int, int], bounds: tuple[int, int], batch: int) -> list[str]:
    """The block's first row and column of C and its batch, from `block` (blockIdx or its dialect's name)
    as `gemm_grid` launched it."""
    (bm, bn), (rows, n) = tile, bounds
    nt_n, nt_m = -(-n // bn), -(-rows // bm)
    if fold_grid(s, nt_m, batch):
        return [f"    const int64_t akg_t = (int64_t){block}.x;",
                f"    const int64_t akg_row0 = (akg_t / {nt_n}) % {nt_m} * {bm}, akg_col0 = akg_t % {nt_n} * {bn};",
                f"    const int64_t akg_batch = akg_t / {nt_n * nt_m};"]
    return [f"    const int64_t akg_row0 = (int64_t){block}.y * {bm}, akg_col0 = (int64_t){block}.x * {bn};",
            f"    const int64_t akg_batch = {block}.z;"]


def stage_operands(style: CStyle, g: GemmParts, tiles: tuple[int, int, int], bounds: tuple[int, int], thread: str,
                   nthreads: int, put_a: str, put_b: str) -> list[str]:
    """One K step's A (BMxBK) and B (BKxBN) tiles into group memory, the prologue applied to each element;
    `put_a`/`put_b` store `akg_v` at (akg_r, akg_c). Out-of-range elements are zeros."""
    (bm, bn, bk), (rows, n) = tiles, bounds
    kn, kk = g.k.name, g.k.extent
    out: list[str] = []
    for expr, (outer, inner), var, base, lim, decodes, put in (
            (g.a, (bm, bk), "akg_row", "akg_row0 + akg_r", rows, (g.batch, g.rows), put_a),
            (g.b, (bk, bn), "akg_col", "akg_col0 + akg_c", n, (g.batch, g.cols), put_b)):
        kidx = "akg_k0 + akg_c" if var == "akg_row" else "akg_k0 + akg_r"
        out += [f"        for (int akg_i = {thread}.x; akg_i < {outer * inner}; akg_i += {nthreads}) {{",
                f"            const int akg_r = akg_i / {inner}, akg_c = akg_i % {inner};",
                f"            const int64_t {var} = {base}, {kn} = {kidx};", "            float akg_v = 0.f;",
                f"            if ({var} < {lim} && {kn} < {kk}) {{"]
        p = CPrinter(style, {kn: kn}, prefix="a" if var == "akg_row" else "b", indent="                ")
        decode(decodes[0], "akg_batch", p)
        decode(decodes[1], var, p)
        val = p(expr)
        out += [*p.lines, f"                akg_v = (float)({val});", "            }", f"            {put}",
                "        }"]
    return out


def epilogue(style: CStyle, k: Kernel, g: GemmParts, acc: str, indent: str) -> list[str]:
    """The fused epilogue of one C element at (akg_row, akg_col), the dot's value being `acc`, and its store."""
    pe = CPrinter(style, {}, prefix="e", indent=indent)
    pe.fixed[id(g.dot)] = f"(({style.ctype_compute(k.out.dtype)}){acc})"
    decode(g.batch, "akg_batch", pe)
    decode(g.rows, "akg_row", pe)
    decode(g.cols, "akg_col", pe)
    val = pe(k.expr)
    flat = " + ".join(f"{v.name} * {st}" if st != 1 else v.name for v, st in zip(k.coords, k.out.strides())) or "0"
    return pe.lines + [f"{indent}out[{flat}] = {style.store(k.out.dtype, val)};"]
