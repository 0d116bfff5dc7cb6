"""A row kernel whose output reads the terms of its own row sum (a softmax, t = exp(x - max), then
out = f(t / sum t) for any pointwise f: a scale, a weight per column): each term computed once. The
sum's loop keeps the terms in the output's own row where the output is that row (fp32: the sweep then
stores in place, never streamed; no second row in the cache and no copy through one), else in a scratch
row of the thread's (in L1); the output's sweep reads them there instead of computing them again (an exp
per element saved), and the sum is kept in fp32
partial sums per chunk of the row, added to a double per chunk (a conversion and a 4-lane double add
per element cost as much as the exp)."""

from __future__ import annotations

from ir.kernel.analysis import row_split, same_renamed
from ir.kernel.ir import Expr, Kernel, Op, Reduce, walk

from ..cstyle import CPrinter, decode
from ..exprs import row_coords, rows_lead

CHUNK = 512  # terms per fp32 partial sum (each SIMD lane adds CHUNK / lanes of them)


def kept_sum(k: Kernel, cols: list[tuple[str, int]]) -> tuple[Reduce, list[Expr]] | None:
    """The fp32 row sum over the one column coordinate whose terms the output reads (no other reduction
    reading the sum), and those terms; None where `k` is not of that form."""
    if k.also or len(cols) != 1:
        return None
    col, n = cols[0]
    reds = list(dict.fromkeys(k.reductions()))
    for total in reds:
        if total.op != "sum" or len(total.axes) != 1 or total.axes[0].extent != n or total.body.dtype != "f32" \
                or not isinstance(total.body, Op):  # a load is read again as cheaply as it would be kept
            continue
        ren = {total.axes[0].name: col}
        terms = [x for x in walk(k.expr, skip=Reduce) if same_renamed(x, total.body, ren)]
        if terms and not any(total is y for r in reds if r is not total for y in walk(r.body)):
            return total, terms
    return None


def _output_row(k: Kernel) -> bool:
    """A row kernel whose output's row may hold its terms (fp32, the rows leading it; not stored over an
    operand, whose row the sweep still reads); the sum not looked at."""
    return (k.kind == "rownorm" and k.out.dtype == "f32" and not k.in_place and row_split(k) is not None
            and rows_lead(k))


def terms_in_output(k: Kernel) -> bool:
    """Whether a row kernel keeps its sum's terms in its output's row (`cache_terms`)."""
    return _output_row(k) and kept_sum(k, row_coords(k)[1]) is not None


def cache_terms(k: Kernel, p: CPrinter, cols: list[tuple[str, int]]) -> bool:
    """Where `k` is of `kept_sum`'s form: the row's other reductions and the sum's loop printed into `p`,
    the sum and each term the output reads fixed to what that loop left (the output's sweep then reads
    `akg_t[akg_col]`, in the output's row where `terms_in_output`). False, `p` untouched, otherwise."""
    found = kept_sum(k, cols)
    if found is None:
        return False
    total, terms = found
    n, ind = cols[0][1], p.indent
    for r in dict.fromkeys(k.reductions()):
        if r is not total:
            p(r)  # the terms' own reductions (the row maximum), before the sum reads them
    part, acc = p.fresh(), p.fresh()
    inner = p.scope(p.env, ind + "        ")
    decode([(total.axes[0].name, n)], "akg_col", inner)
    val = inner(total.body)
    into = f"out + akg_row * {n}" if _output_row(k) else f"akg_row_scratch({n})"  # `terms_in_output`, the sum found
    p.lines += [f"{ind}float* akg_t = {into};", f"{ind}double {acc} = 0;",
                f"{ind}for (int64_t akg_kc = 0; akg_kc < {n}; akg_kc += {CHUNK}) {{",
                f"{ind}    const int64_t akg_ke = std::min<int64_t>({n}, akg_kc + {CHUNK});",
                f"{ind}    float {part} = 0;", f"{ind}    #pragma omp simd reduction(+:{part})",
                f"{ind}    for (int64_t akg_col = akg_kc; akg_col < akg_ke; ++akg_col) {{", *inner.lines,
                f"{inner.indent}akg_t[akg_col] = {val};", f"{inner.indent}{part} += {val};", f"{ind}    }}",
                f"{ind}    {acc} += {part};", f"{ind}}}"]
    p.fixed[id(total)] = f"((float){acc})"
    for t in terms:
        p.fixed[id(t)] = "akg_t[akg_col]"
    return True
