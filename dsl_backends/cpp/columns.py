"""Values computed once into a table instead of once per element. A row kernel's values that depend on
its column alone (a gate's sigmoid over the features, times a standardised row), before the rows: the
C++ compiler cannot hoist a math call out of the row loop (it may set errno), and recomputing it costs
one call per element. An implicit GEMM's reduction index decoded into channel and kernel offsets (a
division and a remainder per element of A), before the GEMM."""

from __future__ import annotations

from ir.kernel.ir import Buf, Const, Expr, IOp, Kernel, Load, Op, Reduce, Rewrite, Var, children, free_vars, walk

from ..cstyle import CPrinter, decode
from ..exprs import FLOATS
from .style import STYLE

COSTLY = frozenset({"exp", "log", "log1p", "expm1", "tanh", "erf", "pow", "sin", "cos", "sqrt", "rsqrt", "atan2",
                    "div"})


def column_values(k: Kernel, cols: list[tuple[str, int]], loads: bool = False,
                  more: tuple[Expr, ...] = ()) -> list[Expr]:
    """The largest sub-expressions of `k`'s value (outside its reductions) over its columns alone that
    make a costly call; with `loads`, every one that reads memory too (a channel's mean, weight and bias
    where the columns span several coordinates: read at `column % channels`, a gather per element). `more`:
    other forms of the value the kernel prints (its row cases', its interior's)."""
    names, memo, found, seen = {c for c, _ in cols}, {}, [], set()
    stack = [k.expr, *(e for _, e in k.also), *more]
    while stack:
        e = stack.pop()
        if id(e) in seen or isinstance(e, (Reduce, Var, Const)):
            continue
        seen.add(id(e))
        fv = free_vars(e, memo)
        if isinstance(e, (Op, Load)) and fv and fv <= names and e.dtype in FLOATS and \
                (_costly(e) or loads and _reads(e)):
            found.append(e)
        elif isinstance(e, Op):
            stack.extend(e.args)
    return found


def _reads(e: Expr) -> bool:
    return isinstance(e, Load) or isinstance(e, Op) and any(_reads(a) for a in e.args)


def _costly(e: Expr) -> bool:
    if isinstance(e, Op):
        return e.op in COSTLY or any(_costly(a) for a in e.args)
    return False


def row_values(p: CPrinter, exprs: list[Expr], col: str | set[str]) -> None:
    """Prints into `p` (a row's scope) each sub-expression of `exprs` free of the column coordinate(s)
    `col`: a row's own values (a channel's scale and shift) once a row, not once an element."""
    memo: dict[int, frozenset[str]] = {}
    cols = {col} if isinstance(col, str) else col
    for x in exprs:
        for e in walk(x):
            if not isinstance(e, (Var, Const)) and not cols & free_vars(e, memo):
                p(e)


def precompute(values: list[Expr], cols: list[tuple[str, int]], n: int,
               at: str = "akg_col") -> tuple[list[str], dict[int, str]]:
    """Lines that fill one array per value over the columns (before the row loop), and what the row
    kernel's printer reads in place of each value (at its column index `at`). Equal values (one per tap of a
    window whose prologue normalises, or per row case) share one array."""
    if not values:
        return [], {}
    p = CPrinter(STYLE, {}, prefix="akg_cvt", indent="        ")
    decode(cols, "akg_col", p)
    lines, fixed, sets, tables = [], {}, [], {}
    for e in values:
        if e not in tables:
            i = tables[e] = len(tables)
            lines.append(f"    std::vector<{STYLE.ctype_compute(e.dtype)}> akg_cv{i}({n});")
            sets.append(f"        akg_cv{i}[akg_col] = {p(e)};")
        fixed[id(e)] = f"akg_cv{tables[e]}[{at}]"
    return lines + [f"    for (int64_t akg_col = 0; akg_col < {n}; ++akg_col) {{", *p.lines, *sets, "    }"], fixed



def index_values(e: Expr, var: str) -> list[Expr]:
    """The largest integer sub-expressions of `e` over `var` alone that divide or take a remainder (an
    implicit GEMM's reduction index decoded into channel and kernel offsets): a table per value over
    `var` replaces the divisions made once per element of A."""
    memo: dict[int, frozenset[str]] = {}
    found, seen, stack = [], set(), [e]
    while stack:
        x = stack.pop()
        if id(x) in seen or isinstance(x, (Var, Const)):
            continue
        seen.add(id(x))
        if isinstance(x, IOp) and free_vars(x, memo) == {var} and _divides(x):
            found.append(x)
        else:
            stack.extend(children(x))
    return found


def _divides(e: Expr) -> bool:
    return isinstance(e, IOp) and (e.op in ("//", "%") or _divides(e.a) or _divides(e.b))


class _Tables(Rewrite):
    def __init__(self, swap: dict[int, Expr]) -> None:
        super().__init__()
        self.swap = swap

    def _go(self, e: Expr) -> Expr:
        return self.swap.get(id(e)) or self.rebuild(e)


def index_tables(e: Expr, var: Var) -> tuple[Expr, list[str]]:
    """`e` with each of its `index_values` over `var` read from a table (a load of `akg_kv<i>` at `var`),
    and the lines that fill the tables (before the kernel's loops). The load's flat index then adds
    table entries where it divided."""
    values = index_values(e, var.name) if isinstance(var.extent, int) else []  # a run-time extent: none
    if not values:
        return e, []
    p = CPrinter(STYLE, {var.name: var.name}, prefix="akg_kvt", indent="        ")
    lines, sets, swap = [], [], {}
    for i, x in enumerate(values):
        table = Buf(f"akg_kv{i}", (var.extent,), "i64")
        lines.append(f"    std::vector<int64_t> {table.name}({var.extent});")
        sets.append(f"        {table.name}[{var.name}] = {p(x)};")
        swap[id(x)] = Load(table, (var,))
    head = f"    for (int64_t {var.name} = 0; {var.name} < {var.extent}; ++{var.name}) {{"
    return _Tables(swap)(e), lines + [head, *p.lines, *sets, "    }"]
