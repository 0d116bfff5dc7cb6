"""A pointwise loop that reads a buffer of another shape at the output's own flat position (a matmul's
[256, 3072] read by a (2, 128, 3072) GELU that also stores its tanh) reads it at the loop's flat index:
the re-split index (a division and a remainder per element) kept gcc from vectorising the loop, 24x slower
on that GELU on this CPU (`dsl_backends/cstyle.py`)."""

from __future__ import annotations

from dsl_backends.cstyle import _reads_in_order
from ir.kernel.ir import Buf, Const, IOp, Load, Var

B, T, C = Var("b", 2), Var("t", 128), Var("c", 3072)
MM = Buf("mm", (256, 3072), "f32")


def _row(wrap: int | None = 256, scale: int = 128) -> IOp:
    row = IOp("+", IOp("*", B, Const(scale, "i64")), T)
    return IOp("%", row, Const(wrap, "i64")) if wrap else row


def test_a_merged_or_wrapped_row_is_the_loops_own_flat_index():
    coords, shape = ("b", "t", "c"), (2, 128, 3072)
    assert _reads_in_order(Load(MM, (_row(None), C)), coords, shape)
    assert _reads_in_order(Load(MM, (_row(256), C)), coords, shape)  # the wrap never happens


def test_reads_elsewhere_keep_their_index():
    coords, shape = ("b", "t", "c"), (2, 128, 3072)
    assert not _reads_in_order(Load(MM, (_row(100), C)), coords, shape)  # a wrap that happens
    assert not _reads_in_order(Load(MM, (_row(None, scale=64), C)), coords, shape)  # rows overlap
    assert not _reads_in_order(Load(MM, (T, C)), coords, shape)  # a broadcast over b
    assert not _reads_in_order(Load(Buf("w", (3072, 256), "f32"), (C, _row(None))), coords, shape)  # transposed
    assert not _reads_in_order(Load(MM, (_row(None), IOp("+", C, Const(1, "i64")))), coords, shape)  # shifted
