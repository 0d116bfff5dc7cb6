"""Kernel-IR helpers that backends rely on."""

from __future__ import annotations

import math

from ir.kernel.ir import Const, IOp, Var, index_bounds


def test_index_bounds():
    i, j = Var("i", 6), Var("j", 2)
    c = lambda v: Const(v, "i64")  # noqa: E731
    assert index_bounds(IOp("+", IOp("*", i, c(5)), j)) == (0, 26)
    shifted = IOp("-", j, c(1))  # a concatenation segment's local index: negative outside it
    assert index_bounds(shifted) == (-1, 0)
    assert index_bounds(IOp("//", IOp("+", IOp("*", shifted, c(5)), i), c(5))) == (-1, 1)
    assert index_bounds(IOp("%", shifted, c(3))) == (-2, 2) and index_bounds(IOp("%", i, c(4))) == (0, 3)
    assert index_bounds(IOp("max", shifted, IOp("-", c(0), shifted))) == (0, 1)  # |x|
    assert index_bounds(IOp("<", i, j)) == (0, 1)
    assert index_bounds(IOp("*", i, c(-2))) == (-10, 0)
    assert index_bounds(IOp("+", i, IOp("//", c(1), c(0)))) == (-math.inf, math.inf)  # no rule: unbounded


def test_triton_keeps_floor_semantics_on_negative_indices(tmp_path):
    """Circular padding takes a remainder of negative indices in lanes it keeps; Triton's % truncates
    and its axis analysis assumes operands >= 0, so the renderer shifts them first. Verified through
    the interpreter here and natively where a GPU exists."""
    from akg_agent.translate import translate

    from .conftest import ROOT

    t = translate(ROOT / "tests" / "fixtures" / "pad_circular.py", "triton", "h100", tmp_path / "m.py", timing=False)
    assert t.verdict.accepted, t.verdict.line()
    assert "+ 5) % 5)" in (tmp_path / "m.py").read_text()  # (c - 1) shifted by one period
