"""Small windows as pointwise kernels (ir/kernel/unroll.py): pooling windows and sums over a few elements
are unrolled into a tree of the combining op, checked against the graph interpreter (NaN included);
wide reductions keep their reduce template."""

from __future__ import annotations

import math

import torch

from ir import run
from ir.kernel.expand import expand_program
from ir.kernel.interp import run_program
from ir.kernel.lower import lower
from ir.kernel.unroll import WINDOW_MAX, unroll_program
from ir.lift import lift
from ir.passes import run_passes
from ir.problem import load_problem

from .conftest import problem_path


def _programs(name):
    p = load_problem(problem_path(name))
    g = lift(p)
    run_passes(g, ["simplify", "decompose", "simplify", "fuse"])
    before = expand_program(lower(g, generated=frozenset({"window", "scan"})))
    return p, g, before, unroll_program(before)


def test_pooling_windows_become_pointwise_kernels_with_the_same_values_nan_included():
    for name in ("pool_max_1d_2d_3d", "pool_avg_1d_2d_3d"):
        p, g, before, after = _programs(name)
        assert [k.kind for k in before.kernels()] == ["reduce"] * 3
        assert [k.kind for k in after.kernels()] == ["pointwise"] * 3
        inputs = [x for x in p.make_inputs(0)]
        x = inputs[0].clone()
        x.view(-1)[5] = float("nan")  # a NaN inside some windows: max and mean propagate it there
        for xs in (inputs, [x, *inputs[1:]]):
            want = run(g, xs)
            for a, b in zip(run_program(after, xs, g.weights), want, strict=True):
                torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-6, equal_nan=True)
            assert any(bool(torch.isnan(o).any()) for o in want) or xs is inputs


def test_a_wide_reduction_keeps_its_reduce_template():
    _, _, before, after = _programs("red_sum_mean")
    size = {k.name: max(math.prod(v.extent for v in r.axes) for r in k.reductions()) for k in before.kernels()}
    kinds = {k.name: k.kind for k in after.kernels()}
    assert sorted(size.values()) == [16, 128, 2048, 2048]
    assert all(kinds[n] == ("pointwise" if s <= WINDOW_MAX else "reduce") for n, s in size.items())


def test_pool_indices_are_torchs_positions_ties_nan_and_all_minus_inf_windows_included():
    """A max pool's indices unrolled into a compare-and-select chain (with the values, one pointwise kernel
    per pool): the first maximum in window order, NaN winning, a window of -inf pointing at its first
    position inside the input, as torch's do."""
    p, g, before, after = _programs("pool_max_indices")
    assert [k.kind for k in after.kernels()].count("reduce") == 0
    assert sum(1 for k in after.kernels() if k.out.dtype == "i64" or any(b.dtype == "i64" for b, _ in k.also)) == 3
    inputs = p.make_inputs(0)
    nan = [x.clone() for x in inputs]
    for x in nan:
        x.view(-1)[7] = float("nan")
    ninf = [torch.full_like(x, -math.inf) for x in inputs]
    for xs in (inputs, nan, ninf, [x.clamp(max=0.0) for x in inputs]):  # the last: ReLU of it is all ties
        want = run(g, xs)
        for a, b in zip(run_program(after, xs, g.weights), want, strict=True):
            torch.testing.assert_close(a, b, atol=0, rtol=0, equal_nan=True)
