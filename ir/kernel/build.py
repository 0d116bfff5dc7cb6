"""Smart constructors for kernel-IR expressions: fold constant index arithmetic as it is built."""

from __future__ import annotations

from typing import Any

from ..ops import normalize_attrs
from ..sym import is_dynamic
from .ir import Const, Expr, IOp, Op

I64 = "i64"


def ic(v: int) -> Const:
    return Const(v if is_dynamic(v) else int(v), I64)  # a run-time size (--dynamic) stays its expression


def _val(e: Expr) -> Any:
    """A constant operand's value for folding; a run-time size only folds arithmetic, never a question."""
    return e.value if isinstance(e, Const) and not is_dynamic(e.value) else None


def _sym(e: Expr) -> Any:
    return e.value if isinstance(e, Const) else None


def iop(op: str, a: Expr, b: Expr) -> Expr:
    va, vb = _val(a), _val(b)
    if va is not None and vb is not None and op in _FOLD:
        r = _FOLD[op](va, vb)
        return Const(r, "bool" if isinstance(r, bool) else I64)
    sa, sb = _sym(a), _sym(b)
    if op in ("+", "-", "*") and sa is not None and sb is not None:  # sizes fold symbolically
        return Const(_FOLD[op](sa, sb), I64)
    if op == "+" and vb == 0 or op == "-" and vb == 0 or op in ("*", "//") and vb == 1:
        return a
    if op == "+" and va == 0 or op == "*" and va == 1:
        return b
    if op == "*" and (va == 0 or vb == 0):
        return ic(0)
    if op == "%" and vb == 1:
        return ic(0)
    if op == "and" and vb is True or op == "and" and va is True:
        return a if vb is True else b
    dtype = "bool" if op in ("<", "<=", "==", "!=", ">=", ">", "and", "or") else I64
    return IOp(op, a, b, dtype)


_FOLD = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
         "//": lambda a, b: a // b if b else 0, "%": lambda a, b: a % b if b else 0,
         "min": min, "max": max, "<": lambda a, b: a < b, "<=": lambda a, b: a <= b,
         "==": lambda a, b: a == b, "!=": lambda a, b: a != b, ">=": lambda a, b: a >= b,
         ">": lambda a, b: a > b, "and": lambda a, b: bool(a and b), "or": lambda a, b: bool(a or b)}


def land(a: Expr | None, b: Expr | None) -> Expr | None:
    if a is None:
        return b
    if b is None:
        return a
    return iop("and", a, b)


def op(name: str, args: list[Expr], dtype: str, /, **attrs: Any) -> Op:
    return Op(name, tuple(args), tuple(normalize_attrs(name, attrs).items()), dtype)


def where(cond: Expr, a: Expr, b: Expr, dtype: str) -> Expr:
    if isinstance(cond, Const):
        return a if cond.value else b
    return op("where", [cond, a, b], dtype)
