"""The blocked GEMM's packed weights kept with the module (batch 1-8 inference calls the same layer over
and over with the same weights: packing them on every call costs a pass over the whole weight matrix).

A GEMM whose B operand reads parameters only is packed into a buffer the module keeps, and packed again
only where a weight is another tensor, has moved, or was written since (torch's version counter, which
every in-place write through the tensor or its views bumps, `load_state_dict` included). A write that
bypasses the counter (through `.data`, or a NumPy view) is caught by the kernel itself: before using its
copy it recomputes B at `PACK_SAMPLES` places spread over the matrix and compares them bit for bit; on a
difference it packs into a buffer of its own for this call and tells the module to drop its copy."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ir.kernel.analysis import GemmParts, split_gemm
from ir.kernel.build import iop
from ir.kernel.interior import row_interior
from ir.kernel.ir import Buf, Const, Expr, IOp, Kernel, Load, Op, Var, free_vars, size_args, walk

from ..cstyle import CPrinter, decode
from ..exprs import reads_along
from .columns import index_tables
from .gemv import one_column, small_m
from .style import STYLE

PACK_SAMPLES = 64
PACK = 64  # side of the tiles B is packed in
_DTYPES = {"float": "torch.float32", "double": "torch.float64", "uint16_t": "torch.int16"}


def bf16_pairs(g: GemmParts) -> bool:
    """Both operands bf16 and K even: B is packed as bf16 pairs (a column's values at K rows 2p and 2p + 1
    side by side, 32 bits a column), half the bytes of an fp32 copy, which one AVX512-BF16 dot product
    takes two K rows at a time (tile.pair_tile)."""
    return g.a.dtype == "bf16" and g.b.dtype == "bf16" and g.k.extent % 2 == 0


def packed_type(g: GemmParts) -> str:
    """The C type of B's packed copy: its 16 bits where packed as bf16 pairs, else B's compute type."""
    return "uint16_t" if bf16_pairs(g) else STYLE.ctype_compute(g.b.dtype)


def packed_value(g: GemmParts, val: str) -> str:
    """B's value `val` (in its compute type) as its packed copy holds it."""
    return f"akg_f32_to_bf16({val})" if bf16_pairs(g) else val


def a_panel(val: str, pair: bool) -> str:
    """A's value (its compute type) as the GEMM's packed A panel holds it: its bf16 bits beside bf16 pairs
    of B (exact: the value is a bf16 operand's), else the compute type."""
    return f"akg_f32_to_bf16({val})" if pair else f"(double)({val})"


def panel_float(ref: str, pair: bool) -> str:
    """A packed panel's element `ref` as a float."""
    return f"akg_bf16_to_f32({ref})" if pair else ref


def packed_at(kk: int, nr: int, pair: bool, strip: str, k: str, col: str) -> str:
    """Where, inside a batch's packed B, the element at K row `k` and column `col` of strip `strip` lies:
    each strip's K rows one after another, NR values a row; as pairs, rows 2p and 2p + 1 interleaved
    column by column."""
    if pair:
        return f"({strip}) * {kk * nr} + (({k}) & ~1LL) * {nr} + ({col}) * 2 + (({k}) & 1)"
    return f"(({strip}) * {kk} + {k}) * {nr} + {col}"


def weight_bufs(k: Kernel) -> list[Buf]:
    """The parameters the blocked GEMM's B operand reads, where it reads nothing else and is packed
    (more rows than `gemv.small_m` takes, or a batch); else []."""
    if k.kind != "matmul" or size_args(k) or small_m(k) or one_column(k):
        return []
    g = split_gemm(k)
    if packed_type(g) not in _DTYPES:
        return []
    bufs = {e.buf.name: e.buf for e in walk(g.b) if isinstance(e, Load)}
    return list(bufs.values()) if bufs and all(b.role == "param" for b in bufs.values()) else []


def pack_params(k: Kernel) -> tuple[str, ...]:
    """The kernel's extra parameters: the module's packed copy and whether to pack into it."""
    if not weight_bufs(k):
        return ()
    return (f"{packed_type(split_gemm(k))}* akg_bpc", "const int64_t akg_fresh")


def pack_loops(g: GemmParts, n: int, nr: int, bt: str) -> list[str]:
    """The loops (after the parallel pragma) that pack B into `akg_bp` in PACK x PACK tiles of its K rows
    (batches stacked) and N columns. Inside a tile the inner loop runs along B's stored rows: a row a power
    of two long puts a tile's column of elements in one cache set, which does not hold the tile. Where that
    is along N, a strip of NR columns at a time goes to one contiguous run of the packed copy (the copy
    vectorises; an index with a division and a modulo per element did not)."""
    kk, kv = g.k.extent, g.k.name
    kp, npad = kk * math.prod(e for _, e in g.batch), -(-n // nr) * nr
    out = [f"    for (int64_t akg_p0 = 0; akg_p0 < {kp}; akg_p0 += {PACK}) {{",
           f"    for (int64_t akg_c0 = 0; akg_c0 < {n}; akg_c0 += {PACK}) {{"]
    cols = f"for (int64_t akg_col = akg_c0; akg_col < std::min<int64_t>(akg_c0 + {PACK}, {n}); ++akg_col) {{"
    ks = f"for (int64_t akg_p = akg_p0; akg_p < std::min<int64_t>(akg_p0 + {PACK}, {kp}); ++akg_p) {{"
    at_k = f"const int64_t akg_batch = akg_p / {kk}, {kv} = akg_p % {kk};"
    pp = CPrinter(STYLE, {kv: kv}, prefix="p", indent="            ")
    decode(g.batch, "akg_batch", pp, bounded=True)
    decode(g.cols, "akg_col", pp, bounded=True)
    b_val = packed_value(g, pp(g.b))
    pair = bf16_pairs(g)
    along = reads_along(g.b, g.cols[-1][0])
    if along and PACK % nr == 0:  # a strip's row (or pair of rows) one contiguous run of the packed copy
        step = "2 * " if pair else ""
        return out + ["    " + ks, "        " + at_k,
                      f"        for (int64_t akg_s = akg_c0; akg_s < std::min<int64_t>(akg_c0 + {PACK}, {n}); "
                      f"akg_s += {nr}) {{",
                      f"        {bt}* akg_dst = akg_bp + akg_batch * {kk * npad} + "
                      f"{packed_at(kk, nr, pair, f'akg_s / {nr}', kv, '0')} - {step}akg_s;",
                      f"        for (int64_t akg_col = akg_s; akg_col < std::min<int64_t>(akg_s + {nr}, {n}); "
                      "++akg_col) {", *pp.lines, f"            akg_dst[{step}akg_col] = {b_val};",
                      "        }", "        }", "    }", "    }", "    }"]
    outer, inner = (ks, cols) if along else (cols, ks)
    return out + ["    " + outer, "        " + inner, "            " + at_k, *pp.lines,
                  f"            akg_bp[{packed_place(kk, npad, nr, kv, pair)}] = {b_val};", "        }", *["    }"] * 3]


def packed_place(kk: int, npad: int, nr: int, kv: str, pair: bool) -> str:
    """Where B's element (akg_batch, kv, akg_col) lies in the packed copy (`packed_at` in its batch)."""
    return f"akg_batch * {kk * npad} + {packed_at(kk, nr, pair, f'akg_col / {nr}', kv, f'akg_col % {nr}')}"


def pack_check(g: GemmParts, n: int, nr: int, bt: str) -> list[str]:
    """Lines that set `akg_stale` where the kept copy (strips of `nr` columns) differs from B at the
    sampled places, and then point `akg_bp` at a buffer of this call's own."""
    kk, kv, npad = g.k.extent, g.k.name, -(-n // nr) * nr
    kp = kk * math.prod(e for _, e in g.batch)
    out = ["    int akg_stale = 0;", "    if (!akg_fresh) {",
           f"        for (int64_t akg_s = 0; akg_s < {PACK_SAMPLES} && !akg_stale; ++akg_s) {{",
           # spread over rows and columns of B; the first and last element among them
           f"            const int64_t akg_p = akg_s == {PACK_SAMPLES - 1} ? {kp - 1} : (akg_s * 2654435761LL) % {kp};",
           f"            const int64_t akg_col = akg_s == {PACK_SAMPLES - 1} ? {n - 1} : (akg_s * 40503LL) % {n};",
           f"            const int64_t akg_batch = akg_p / {kk}, {kv} = akg_p % {kk};"]
    pp = CPrinter(STYLE, {kv: kv}, prefix="q", indent="            ")
    decode(g.batch, "akg_batch", pp)
    decode(g.cols, "akg_col", pp)
    val = packed_value(g, pp(g.b))
    place = packed_place(kk, npad, nr, kv, bf16_pairs(g))
    return out + pp.lines + [
        f"            const {bt} akg_v = ({bt})({val});",
        f"            akg_stale = std::memcmp(&akg_v, akg_bp + {place}, sizeof(akg_v)) != 0;",
        "        }", "    }",
        f"    if (akg_stale) {{ akg_own.resize((size_t){kp * npad}); akg_bp = akg_own.data(); }}"]


def pack_launch(k: Kernel, nr: int, args: list[str]) -> list[str]:
    """forward's lines that call the kernel with `args` and the module's packed copy (strips of `nr`)."""
    g = split_gemm(k)
    n = math.prod(e for _, e in g.cols)
    numel = g.k.extent * math.prod(e for _, e in g.batch) * (-(-n // nr) * nr)
    srcs = "".join(f"_akg_get(self, {b.key!r}), " for b in weight_bufs(k))
    return [f"_akg_pk = _akg_pack_take(self, {k.name!r}, ({srcs}), {numel}, {_DTYPES[packed_type(g)]})",
            f"_akg_pack_keep(self, {k.name!r}, _akg_pk, _AKG_LIB.{k.name}({', '.join(args)}, "
            "_akg_pk[0].data_ptr(), _akg_pk[1]))"]


def pack_a_by_k(a_e: Expr, k: str, row_vars: list[tuple[str, int]], block: int, rows: int,
                pair: bool) -> list[str]:
    """A block's A panel packed with K outside and the block's rows inside: an A read along its rows
    (stored transposed) then takes the block's neighbouring rows from each cache line, where K inside
    would walk KC lines a stored row apart (a power of two apart: one cache set) for each row."""
    out = ["            }", "            for (int64_t akg_q = 0; akg_q < akg_kw; ++akg_q) {",
           f"                const int64_t {k} = akg_k0 + akg_q;",
           f"                for (int akg_i = 0; akg_i < {block}; ++akg_i) {{",
           f"                    const int64_t akg_row = akg_rb * {block} + akg_i;",
           f"                    if (akg_row >= {rows}) continue;"]
    p = CPrinter(STYLE, {k: k}, prefix="a", indent="                    ")
    decode(row_vars, "akg_row", p)
    a_val = p(a_e)
    return out + p.lines + [f"                    akg_ap[akg_i][akg_q] = {a_panel(a_val, pair)};", "                }",
                            "            }"]


@dataclass(frozen=True)
class Gathered:
    """A gathered A operand (an implicit GEMM's window), its K index decoded through tables (`lines`, before
    the kernel): `a` as written; `a_in` with its masks taken as true, for rows whose window lies inside the
    input at every K index (the row flags `inner`; no flags: no masks); `direct`: where `a_in` is a plain
    load at a row offset plus a K offset, those two parts, so a block of such rows is read in place by the
    register tile, never packed."""

    a: Expr
    a_in: Expr | None
    inner: tuple[tuple[tuple[str, ...], tuple[int, ...], tuple[bool, ...]], ...]
    direct: tuple[str, Expr, Expr] | None  # (buffer, row offset, K offset)
    lines: list[str]


def gathered_a(a: Expr, k: Var, rows: list[tuple[str, int]]) -> Gathered:
    masked = any(isinstance(e, Load) and e.mask is not None for e in walk(a))
    ri = row_interior(a, k, rows) if masked else None
    if masked and ri is None:
        a, lines = index_tables(a, k)
        return Gathered(a, None, (), None, lines)
    both, lines = index_tables(Op("add", (a, ri.expr if ri else a), (), a.dtype), k)  # one set of tables
    assert isinstance(both, Op)
    a, a_in = both.args
    inner = ri.tables if ri else ()
    lines += [f"    static const unsigned char akg_in{j}[{len(ok)}] = {{{', '.join(str(int(b)) for b in ok)}}};"
              for j, (_, _, ok) in enumerate(inner)]
    direct = None
    # only a window (K decoded through tables, or masks: `lines` fills them): a plain row-major A keeps its
    # packed panel, which the tuned GEMM schedules were measured with
    if lines and isinstance(a_in, Load) and a_in.mask is None and a_in.dtype == "f32":
        flat: Expr = Const(0, "i64")
        for x, st in zip(a_in.index, a_in.buf.strides()):
            flat = iop("+", flat, iop("*", x, Const(st, "i64")))
        parts = _split(flat, {n for n, _ in rows}, k.name)
        if parts is not None:
            direct = (a_in.buf.name, *parts)
    return Gathered(a, a_in, inner, direct, lines)


def _split(e: Expr, rows: set[str], k: str) -> tuple[Expr, Expr] | None:
    """`e` as (a part over the row coordinates) + (a part over `k`), through sums, differences and
    constant factors; None where a term mixes them."""
    names = free_vars(e)
    zero = Const(0, "i64")
    if names <= rows:
        return e, zero
    if names <= {k}:
        return zero, e
    if isinstance(e, IOp) and e.op in ("+", "-"):
        a, b = _split(e.a, rows, k), _split(e.b, rows, k)
        return None if a is None or b is None else (iop(e.op, a[0], b[0]), iop(e.op, a[1], b[1]))
    if isinstance(e, IOp) and e.op == "*" and (not free_vars(e.a) or not free_vars(e.b)):
        c, x = (e.a, e.b) if not free_vars(e.a) else (e.b, e.a)
        sx = _split(x, rows, k)
        return None if sx is None else (iop("*", sx[0], c), iop("*", sx[1], c))
    return None


def direct_setup(g: Gathered, k: str, kk: int, row_vars: list[tuple[str, int]], mr: int,
                 rows: int) -> tuple[list[str], list[str]]:
    """For a `direct` operand: the K offsets' table (before the kernel) and, per row block, the lines that
    decide `akg_direct` (every row of the block present and inside) and set each row's offset."""
    assert g.direct is not None
    pk = CPrinter(STYLE, {k: k}, prefix="o", indent="        ")
    ko = pk(g.direct[2])
    table = [f"    std::vector<int64_t> akg_ko({kk});", f"    for (int64_t {k} = 0; {k} < {kk}; ++{k}) {{", *pk.lines,
             f"        akg_ko[{k}] = {ko};", "    }"]
    pr = CPrinter(STYLE, {}, prefix="r", indent="            ")
    decode(row_vars, "akg_row", pr)
    conds = _flag_conds(g, pr)
    base = pr(g.direct[1])
    block = ["        bool akg_direct = true;", f"        int64_t akg_rbase[{mr}];",
             f"        for (int akg_i = 0; akg_i < {mr} && akg_direct; ++akg_i) {{",
             f"            const int64_t akg_row = akg_rb * {mr} + akg_i;",
             f"            if (akg_row >= {rows}) {{ akg_direct = false; break; }}",
             *pr.lines,
             *([f"            akg_direct = {' && '.join(conds)};"] if conds else []),
             f"            akg_rbase[akg_i] = {base};", "        }"]
    return table, block


def direct_at(g: Gathered, i: int | str) -> str:
    """A's value at row `i` of the block and K index akg_k0 + akg_q, read in place."""
    assert g.direct is not None
    return f"{g.direct[0]}[akg_rbase[{i}] + akg_ko[akg_k0 + akg_q]]"


def _flag_conds(g: Gathered, pf: CPrinter) -> list[str]:
    conds = []
    for j, (rv, shape, _) in enumerate(g.inner):
        flat: Expr | None = None
        for name, ext in zip(rv, shape):
            v = Var(name, ext)
            flat = v if flat is None else iop("+", iop("*", flat, Const(ext, "i64")), v)
        conds.append(f"akg_in{j}[{pf(flat) if flat is not None else 0}]")
    return conds


def gathered_pack(g: Gathered, k: str, env: dict[str, str], pair: bool) -> list[str]:
    """Row akg_i of A's panel filled along K (`env`: the row's coordinates), closing the rows' loop; a row
    whose window lies inside the input at every K index (every flag set) takes the mask-free expression:
    no clamped index, no select, a plain load. A block read in place (`akg_direct`) fills nothing."""
    def fill(e: Expr, ind: str) -> list[str]:
        pa = CPrinter(STYLE, dict(env, **{k: k}), prefix="a", indent=ind + "    ")
        pa.emit(f"const int64_t {k} = akg_k0 + akg_q;")
        val = pa(e)
        return [f"{ind}for (int64_t akg_q = 0; akg_q < akg_kw; ++akg_q) {{", *pa.lines,
                f"{ind}    akg_ap[akg_i][akg_q] = {a_panel(val, pair)};", f"{ind}}}"]

    skip = ["                if (akg_direct) continue;"] if g.direct is not None else []
    if g.a_in is None:
        return skip + fill(g.a, "                ") + ["            }"]
    if not g.inner:  # no masks at all
        return skip + fill(g.a_in, "                ") + ["            }"]
    pf = CPrinter(STYLE, dict(env), prefix="f", indent="                ")
    conds = _flag_conds(g, pf)
    return [*skip, *pf.lines, f"                if ({' && '.join(conds)}) {{", *fill(g.a_in, "                    "),
            "                } else {", *fill(g.a, "                    "), "                }", "            }"]


PACK_RUNTIME = '''

def _akg_pack_take(mod, name, srcs, numel, dtype):
    """The packed copy of GEMM `name`'s weights the module keeps, and 1 where the kernel must pack it:
    the weights are other tensors, moved, or written since (version counter). A new copy is published
    only after its kernel has filled it, so a concurrent call keeps reading the old one."""
    ent = mod.__dict__.get("_akg_packs", {}).get(name)
    if ent is not None and len(ent[0]) == len(srcs) and all(
            t is t0 and t.data_ptr() == p0 and t._version == v0 for t, (t0, _, p0, v0) in zip(srcs, ent[0])):
        return ent[1], 0, None
    # the storages are held so that a freed weight's memory cannot come back at the same address
    key = tuple((t, t.untyped_storage(), t.data_ptr(), t._version) for t in srcs)
    return torch.zeros(numel, dtype=dtype), 1, key  # the strips' padding is never read: zeros all the same


def _akg_pack_keep(mod, name, pk, stale):
    packs = mod.__dict__.setdefault("_akg_packs", {})
    if stale:  # the kernel found the kept copy out of date (a write the version counter missed)
        packs.pop(name, None)
    elif pk[2] is not None:
        packs[name] = (pk[2], pk[0])
'''
