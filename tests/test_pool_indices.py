"""A max pool's indices judged by what they point to (`akg_agent.verifier.indices`), and the training forward
graphs that declare them (`dynamo_train.index_outputs`)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from akg_agent import dynamo_train
from akg_agent.dynamo import _write_problem
from akg_agent.verifier.indices import compare_indices
from akg_agent.verifier.policy import TolerancePolicy
from ir.problem import load_problem

SPEC = {"source": 0, "kernel": [2, 2], "stride": [2, 2], "padding": [0, 0], "dilation": [1, 1]}


def _pool(x: torch.Tensor) -> torch.Tensor:
    return F.max_pool2d(x, 2, 2, return_indices=True)[1]


def test_the_other_of_two_near_equal_maxima_is_a_valid_pick():
    x = torch.rand(2, 3, 4, 4)
    x[1, 2, 0, 0], x[1, 2, 1, 1] = 5.0, 5.0 - 2e-5  # window (0, 0): torch picks position 0
    ref = _pool(x)
    cand = ref.clone()
    cand[1, 2, 0, 0] = 5  # row 1, column 1 of the 4-wide plane: the near-equal one
    assert compare_indices(cand, ref, x, SPEC, TolerancePolicy()).ok
    x[1, 2, 1, 1] = 4.9  # far below the maximum: wrong
    res = compare_indices(cand, ref, x, SPEC, TolerancePolicy())
    assert not res.ok and "below the window's maximum" in res.reason


def test_an_index_outside_its_window_is_wrong_even_where_the_value_ties():
    x = torch.zeros(1, 1, 4, 4)  # all ties: any position in the window is a maximum
    ref = _pool(x)
    cand = ref.clone()
    cand[0, 0, 0, 0] = 1  # inside window (0, 0)
    assert compare_indices(cand, ref, x, SPEC, TolerancePolicy()).ok
    cand[0, 0, 0, 0] = 2  # column 2: window (0, 1)'s
    res = compare_indices(cand, ref, x, SPEC, TolerancePolicy())
    assert not res.ok and "outside their window" in res.reason
    cand[0, 0, 0, 0] = 99
    assert not compare_indices(cand, ref, x, SPEC, TolerancePolicy()).ok


def test_a_training_forward_graph_declares_its_pool_indices_and_computes_what_they_point_to(tmp_path):
    """ResNet's stem: the pool's input (a ReLU) is not saved, its indices are, as a view; the problem file
    declares them, and its probe computes the pool's input from the graph's inputs."""
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU(), torch.nn.MaxPool2d(3, 2, 1))
    graphs: dict[str, torch.fx.GraphModule] = {}
    args: dict[str, tuple] = {}

    def backend(gm, ex):
        def written(g, kind):
            graphs[kind] = g
            return lambda *a: args.setdefault(kind, a) and g.forward(*a)
        return dynamo_train.compile_training(gm, ex, written)

    torch._dynamo.reset()
    x = torch.randn(2, 3, 9, 9)
    torch.compile(model, backend=backend)(x).sum().backward()
    path = _write_problem(graphs["forward"], args["forward"], tmp_path, "forward")
    problem = load_problem(path)
    (k, spec), = problem.module.AKG_INDEX_OUTPUTS.items()
    assert spec["kernel"] == [3, 3] and spec["stride"] == [2, 2] and spec["padding"] == [1, 1]
    inputs = problem.make_inputs(0)
    ref = problem.build_model(0)(*inputs)[k]
    values = problem.module.akg_index_values(*inputs)[spec["value"]]
    assert values.shape == (2, 4, 7, 7) and bool((values >= 0).all())  # the ReLU's output
    picked = ref.reshape(spec["shape"]).clone()
    assert compare_indices(picked, picked, values, spec, TolerancePolicy()).ok
    picked.view(8, -1)[0, 0] = (picked.view(8, -1)[0, 0] + 40) % 49  # another row of the plane: outside
    assert not compare_indices(picked, ref.reshape(spec["shape"]), values, spec, TolerancePolicy()).ok
