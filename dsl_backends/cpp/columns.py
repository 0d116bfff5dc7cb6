"""Values of a row kernel that depend on its column alone (a gate's sigmoid over the features, times a
standardised row) computed once before the rows, not once per row: the C++ compiler cannot hoist a
math call out of the row loop (it may set errno), and recomputing it costs one call per element."""

from __future__ import annotations

from ir.kernel.ir import Const, Expr, Kernel, Op, Reduce, Var, free_vars

from ..cstyle import CPrinter, decode
from ..exprs import FLOATS
from .style import STYLE

COSTLY = frozenset({"exp", "log", "log1p", "expm1", "tanh", "erf", "pow", "sin", "cos", "sqrt", "rsqrt", "atan2",
                    "div"})


def column_values(k: Kernel, cols: list[tuple[str, int]]) -> list[Expr]:
    """The largest sub-expressions of `k`'s value (outside its reductions) over its columns alone that
    make a costly call."""
    names, memo, found, seen = {c for c, _ in cols}, {}, [], set()
    stack = [k.expr]
    while stack:
        e = stack.pop()
        if id(e) in seen or isinstance(e, (Reduce, Var, Const)):
            continue
        seen.add(id(e))
        fv = free_vars(e, memo)
        if isinstance(e, Op) and fv and fv <= names and e.dtype in FLOATS and _costly(e):
            found.append(e)
        elif isinstance(e, Op):
            stack.extend(e.args)
    return found


def _costly(e: Expr) -> bool:
    if isinstance(e, Op):
        return e.op in COSTLY or any(_costly(a) for a in e.args)
    return False


def precompute(values: list[Expr], cols: list[tuple[str, int]], n: int) -> tuple[list[str], dict[int, str]]:
    """Lines that fill one array per value over the columns (before the row loop), and what the row
    kernel's printer reads in place of each value."""
    if not values:
        return [], {}
    p = CPrinter(STYLE, {}, prefix="akg_cvt", indent="        ")
    decode(cols, "akg_col", p)
    lines, fixed, sets = [], {}, []
    for i, e in enumerate(values):
        ty = STYLE.ctype_compute(e.dtype)
        lines.append(f"    std::vector<{ty}> akg_cv{i}({n});")
        sets.append(f"        akg_cv{i}[akg_col] = {p(e)};")
        fixed[id(e)] = f"akg_cv{i}[akg_col]"
    return lines + [f"    for (int64_t akg_col = 0; akg_col < {n}; ++akg_col) {{", *p.lines, *sets, "    }"], fixed

