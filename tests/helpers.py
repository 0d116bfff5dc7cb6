"""Shared checks: a graph against its source module, through the interpreter."""

from __future__ import annotations

import torch

from ir import run
from ir.graph import Graph
from ir.problem import Problem


def module_outputs(problem: Problem, inputs: list, seed: int = 0) -> list[torch.Tensor]:
    model = problem.build_model(seed).eval()
    with torch.no_grad():
        out = model(*inputs)
    return list(out) if isinstance(out, (tuple, list)) else [out]


def assert_matches_module(problem: Problem, g: Graph, seeds=(1, 2), atol=1e-5, rtol=1e-5) -> None:
    for s in seeds:
        inputs = problem.make_inputs(s)
        ref = module_outputs(problem, inputs)
        got = run(g, [x for x in inputs if isinstance(x, torch.Tensor)])
        assert len(ref) == len(got), f"{len(ref)} module outputs, {len(got)} graph outputs"
        for i, (a, b) in enumerate(zip(ref, got)):
            assert a.shape == b.shape, f"output {i}: shape {tuple(a.shape)} vs {tuple(b.shape)}"
            assert a.dtype == b.dtype, f"output {i}: dtype {a.dtype} vs {b.dtype}"
            torch.testing.assert_close(b, a, atol=atol, rtol=rtol, equal_nan=True,
                                       msg=lambda m, i=i, s=s: f"output {i}, seed {s}: {m}")


def assert_same_values(before: Graph, after: Graph, inputs: list, atol=1e-5, rtol=1e-5) -> None:
    a, b = run(before, inputs), run(after, inputs)
    for i, (x, y) in enumerate(zip(a, b)):
        assert x.shape == y.shape and x.dtype == y.dtype, f"output {i} changed type"
        torch.testing.assert_close(y, x, atol=atol, rtol=rtol, equal_nan=True)
