"""Shared helpers for renderers: free variables, constants, and a temporaries printer that walks an
expression tree once and names each non-trivial node."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from ir.kernel.ir import Const, Expr, IOp, Load, Op, Reduce, Var, children

FLOATS = ("f16", "bf16", "f32", "f64")


def free_vars(e: Expr, memo: dict[int, frozenset[str]] | None = None) -> frozenset[str]:
    memo = {} if memo is None else memo
    if id(e) in memo:
        return memo[id(e)]
    if isinstance(e, Var):
        r = frozenset([e.name])
    else:
        r = frozenset().union(*[free_vars(c, memo) for c in children(e)]) if children(e) else frozenset()
        if isinstance(e, Reduce):
            r = r - {v.name for v in e.axes}
    memo[id(e)] = r
    return r


def py_const(value: Any, dtype: str) -> str:
    if dtype == "bool":
        return "True" if value else "False"
    if dtype in FLOATS:
        v = float(value)
        if math.isnan(v):
            return 'float("nan")'
        if math.isinf(v):
            return 'float("inf")' if v > 0 else 'float("-inf")'
        return repr(v)
    return str(int(value))


class Printer:
    """Emits `name = code` lines for an expression DAG, children first; `render` gives the code."""

    def __init__(self, render: Callable[[Expr, Printer], str], prefix: str = "t") -> None:
        self._render = render
        self.lines: list[str] = []
        self.names: dict[int, str] = {}
        self.prefix = prefix
        self.fixed: dict[int, str] = {}  # expressions bound to a name by the template (accumulators)

    def __call__(self, e: Expr) -> str:
        if id(e) in self.fixed:
            return self.fixed[id(e)]
        if id(e) in self.names:
            return self.names[id(e)]
        code = self._render(e, self)
        if isinstance(e, (Var, Const)) or (isinstance(e, IOp) and len(code) < 24):
            return code
        name = f"{self.prefix}{len(self.names)}"
        self.names[id(e)] = name
        self.lines.append(f"{name} = {code}")
        return name


__all__ = ["FLOATS", "Printer", "free_vars", "py_const", "Load", "Op", "Reduce", "IOp", "Const", "Var"]
