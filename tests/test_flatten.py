"""Reductions over adjacent contiguous axes as one (`ir.kernel.flatten`) and the C++ sums that prefetch
ahead of the rows they stream (`CStyle.prefetches`): the kernel interpreter and the verifier keep the
values; a reduction whose axes are used any other way keeps them."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import torch

from akg_agent.translate import build, render
from ir.kernel.flatten import flatten_reductions
from ir.kernel.interp import eval_outputs
from ir.kernel.ir import Buf, IOp, Kernel, Load, Op, Reduce, Var

from .helpers import assert_source_verifies


def _mean_hw(x: Buf, swap: bool = False, masked: bool = False) -> Kernel:
    n, c, h, w = x.shape
    i, j, r, s = Var("i", n), Var("j", c), Var("r", h), Var("s", w)
    mask = IOp("<", r, s, "bool") if masked else None
    body = Load(x, (i, j, s, r) if swap else (i, j, r, s), mask)
    return Kernel("k", "reduce", Buf("o", (n, c), "f32", "output"), (i, j), Reduce("sum", body, (r, s), "f32"))


def test_a_sum_over_h_and_w_becomes_one_axis_with_the_same_values():
    x = Buf("x", (2, 3, 5, 5), "f32", "input")
    env = {"x": torch.randn(2, 3, 5, 5)}
    k = _mean_hw(x)
    flat = flatten_reductions(k)
    (red,) = flat.reductions()
    assert [v.extent for v in red.axes] == [25]
    torch.testing.assert_close(eval_outputs(flat, env, torch.device("cpu"))[0], env["x"].sum((2, 3)))
    for other in (_mean_hw(x, swap=True), _mean_hw(x, masked=True)):  # transposed run; an axis in a mask
        assert flatten_reductions(other) is other


def _problem(tmp_path: Path, body: str, shape: str) -> Path:
    p = tmp_path / "prob.py"
    p.write_text(textwrap.dedent(f"""\
        import torch
        import torch.nn as nn


        class Model(nn.Module):
            def forward(self, x):
                return {body}


        def get_inputs():
            return [torch.randn({shape})]


        def get_init_inputs():
            return []
        """))
    return p


def test_cpp_sums_over_rows_prefetch_ahead_and_verify(tmp_path):
    """A global average pool (H x W = 1800 floats a row: chunks of 1024, each prefetching the next 4 KiB),
    a sum over short last rows (600 floats: the next rows) and a sum over a middle axis (its steps read
    consecutive rows of 64); a sum over the first axis (its steps 3 x 64 floats apart) prefetches nothing."""
    pool = _problem(tmp_path, "torch.nn.functional.adaptive_avg_pool2d(x, 1)", "2, 6, 40, 45")
    src = render(build(pool, "cpp", "cpu", tuned=False))
    assert "__builtin_prefetch(x + " in src and "+ 1024 + akg_pf" in src and "< 1800;" in src
    assert_source_verifies(pool, src, tmp_path)
    last = _problem(tmp_path, "x.sum(-1) * 2.0", "3, 7, 600")
    src = render(build(last, "cpp", "cpu", tuned=False))
    assert "__builtin_prefetch(x + " in src
    assert_source_verifies(last, src, tmp_path)
    middle = _problem(tmp_path, "x.sum(1)", "3, 600, 64")
    src = render(build(middle, "cpp", "cpu", tuned=False))
    step = r"__builtin_prefetch\(x \+ \(c\d+ \* 38400 \+ r\d+ \* 64 \+ \(\(int64_t\)0\)\) \+ 1024 \+ akg_pf\)"
    assert re.search(step, src)
    assert_source_verifies(middle, src, tmp_path)
    first = _problem(tmp_path, "x.sum(0)", "600, 3, 64")
    src = render(build(first, "cpp", "cpu", tuned=False))
    assert "__builtin_prefetch" not in src
    assert_source_verifies(first, src, tmp_path)


def test_an_op_on_an_axis_keeps_it():
    """sum over (r, s) of x[r, s] * r: the axis feeds arithmetic, not only the load's run."""
    x = Buf("x", (4, 5), "f32", "input")
    r, s = Var("r", 4), Var("s", 5)
    body = Op("mul", (Load(x, (r, s)), Op("cast", (r,), (("dtype", "f32"),), "f32")), (), "f32")
    k = Kernel("k", "reduce", Buf("o", (), "f32", "output"), (), Reduce("sum", body, (r, s), "f32"))
    assert flatten_reductions(k) is k
