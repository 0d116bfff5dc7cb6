"""Discrete outputs judged by the values they are taken from (`akg_agent.verifier.discrete`): a max pool's
indices, a ReLU's mask; and the training forward graphs that declare them (`dynamo_train.discrete_outputs`)."""

from __future__ import annotations

from pathlib import Path

import torch
import torch.nn.functional as F

from akg_agent import dynamo_train
from akg_agent.dynamo import _write_problem
from akg_agent.verifier.discrete import compare_discrete
from akg_agent.verifier.policy import TolerancePolicy
from ir.problem import load_problem

SPEC = {"kind": "pool", "value": 0, "shape": [2, 3, 2, 2], "kernel": [2, 2], "stride": [2, 2], "padding": [0, 0],
        "dilation": [1, 1]}


def _pool(x: torch.Tensor) -> torch.Tensor:
    return F.max_pool2d(x, 2, 2, return_indices=True)[1]


def test_the_other_of_two_near_equal_maxima_is_a_valid_pick():
    x = torch.rand(2, 3, 4, 4)
    x[1, 2, 0, 0], x[1, 2, 1, 1] = 5.0, 5.0 - 2e-5  # window (0, 0): torch picks position 0
    ref = _pool(x)
    cand = ref.clone()
    cand[1, 2, 0, 0] = 5  # row 1, column 1 of the 4-wide plane: the near-equal one
    assert compare_discrete(cand, ref, x, None, SPEC, TolerancePolicy()).ok
    x[1, 2, 1, 1] = 4.9  # far below the maximum: wrong
    res = compare_discrete(cand, ref, x, None, SPEC, TolerancePolicy())
    assert not res.ok and "below the window's maximum" in res.reason


def test_an_index_outside_its_window_is_wrong_even_where_the_value_ties():
    x = torch.zeros(2, 3, 4, 4)  # all ties: any position in the window is a maximum
    ref = _pool(x)
    cand = ref.clone()
    cand[0, 0, 0, 0] = 1  # inside window (0, 0)
    assert compare_discrete(cand, ref, x, None, SPEC, TolerancePolicy()).ok
    cand[0, 0, 0, 0] = 2  # column 2: window (0, 1)'s
    res = compare_discrete(cand, ref, x, None, SPEC, TolerancePolicy())
    assert not res.ok and "outside their window" in res.reason
    cand[0, 0, 0, 0] = 99
    assert not compare_discrete(cand, ref, x, None, SPEC, TolerancePolicy()).ok


def test_a_comparison_may_differ_only_where_torchs_value_is_within_tolerance_of_the_constant():
    y = torch.relu(torch.randn(2, 3, 4, 4))
    y[0, 0, 0, 0], y[0, 0, 0, 1] = 3e-5, 0.5
    spec = {"kind": "threshold", "value": 0, "shape": [2, 3, 4, 4], "at": 0.0}
    ref = y <= 0
    cand = ref.clone()
    cand[0, 0, 0, 0] = True  # the pre-activation rounded to just below zero: the same ReLU gradient, nearly
    assert compare_discrete(cand, ref, y, None, spec, TolerancePolicy()).ok
    cand[0, 0, 0, 1] = True  # 0.5 is no rounding away from 0
    res = compare_discrete(cand, ref, y, None, spec, TolerancePolicy())
    assert not res.ok and "1 of 96 comparisons" in res.reason


def test_a_flip_within_twice_torchs_own_error_of_the_constant_is_rounding():
    """A TF32 convolution before the ReLU (cuDNN's default): torch's values near zero are 1e-3 from exact, so
    a flip at 5e-4 is rounding; at 5e-3 it is not."""
    exact = torch.relu(torch.randn(2, 3, 4, 4, dtype=torch.float64))
    y = (exact * (1 + 1e-3 * torch.randn_like(exact))).float()
    y[0, 0, 0, 0], exact[0, 0, 0, 0] = 5e-4, 5e-4
    spec = {"kind": "threshold", "value": 0, "shape": [2, 3, 4, 4], "at": 0.0}
    ref = y <= 0
    cand = ref.clone()
    cand[0, 0, 0, 0] = True
    assert not compare_discrete(cand, ref, y, None, spec, TolerancePolicy()).ok  # no float64: fp32's tolerance
    assert compare_discrete(cand, ref, y, exact, spec, TolerancePolicy()).ok
    y[0, 0, 0, 0], exact[0, 0, 0, 0] = 5e-2, 5e-2
    assert not compare_discrete(cand, ref, y, exact, spec, TolerancePolicy()).ok


def _stem_problem(d: Path) -> Path:
    """A ResNet stem's training forward graph (conv, ReLU, max pool) written as a problem file in `d`."""
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU(), torch.nn.MaxPool2d(3, 2, 1))
    graphs: dict[str, torch.fx.GraphModule] = {}
    args: dict[str, tuple] = {}

    def backend(gm, ex):
        def written(g, kind):
            graphs[kind] = g
            return lambda *a: args.setdefault(kind, a) and g.forward(*a)
        return dynamo_train.compile_training(gm, ex, written)

    torch._dynamo.reset()
    torch.compile(model, backend=backend)(torch.randn(2, 3, 9, 9)).sum().backward()
    return _write_problem(graphs["forward"], args["forward"], d, "forward")


def test_a_training_forward_graph_declares_its_discrete_outputs_and_computes_their_values(tmp_path):
    """ResNet's stem: the pool's input (a ReLU) is not saved, its indices are, as a view, and the ReLU's mask;
    the problem file declares them, and its probe computes their values from the graph's inputs."""
    path = _stem_problem(tmp_path)
    problem = load_problem(path)
    found = problem.module.AKG_DISCRETE_OUTPUTS
    assert sorted(s["kind"] for s in found.values()) == ["pool", "threshold"]
    (k, spec), = [(k, s) for k, s in found.items() if s["kind"] == "pool"]
    assert spec["kernel"] == [3, 3] and spec["stride"] == [2, 2] and spec["padding"] == [1, 1]
    inputs = problem.make_inputs(0)
    outs = problem.build_model(0)(*inputs)
    values = problem.module.akg_discrete_values(*inputs)
    relu = values[spec["value"]]
    assert relu.shape == (2, 4, 7, 7) and bool((relu >= 0).all())  # the ReLU's output
    (m, mask), = [(k, s) for k, s in found.items() if s["kind"] == "threshold"]
    assert mask["at"] == 0.0 and torch.equal(outs[m].reshape(mask["shape"]), values[mask["value"]] <= 0)
    picked = outs[k].clone()
    assert compare_discrete(picked, outs[k], relu, None, spec, TolerancePolicy()).ok
    picked.view(8, -1)[0, 0] = (picked.view(8, -1)[0, 0] + 40) % 49  # another row of the plane: outside
    assert not compare_discrete(picked, outs[k], relu, None, spec, TolerancePolicy()).ok


_FLIPS = '''
import importlib.util
import torch

AKG_LIBRARY_CALLS = ["aten.*"]  # torch's graph, run as it is: the flip is what is judged
_spec = importlib.util.spec_from_file_location("akg_test_graph", {path!r})
g = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(g)


class ModelNew(torch.nn.Module):
    """The graph, its ReLU mask flipped at one value: {which}."""

    def __init__(self):
        super().__init__()
        self.m = g.Model()

    def forward(self, *args):
        out = list(self.m(*args))
        y = g.akg_discrete_values(*args)[{value}].reshape(-1)
        i = int((y == 0).nonzero()[0]) if {at_zero} else int(y.argmax())
        mask = out[{k}].clone()
        mask.view(-1)[i] = ~mask.view(-1)[i]
        out[{k}] = mask
        return tuple(out)
'''


def test_the_verifier_accepts_a_mask_flipped_at_zero_and_rejects_one_flipped_far_from_it(tmp_path):
    """Through the verifier's worker: the probe runs on the trial's inputs, in float64 too."""
    from akg_agent.cli import main

    (tmp_path / "g").mkdir()
    path = _stem_problem(tmp_path / "g")
    (k, spec), = [(k, s) for k, s in load_problem(path).module.AKG_DISCRETE_OUTPUTS.items()
                  if s["kind"] == "threshold"]
    for at_zero, code in ((True, 0), (False, 1)):
        cand = tmp_path / f"flip_{at_zero}.py"
        cand.write_text(_FLIPS.format(path=str(path), value=spec["value"], k=k, at_zero=at_zero,
                                      which="where torch's value is 0" if at_zero else "at the largest value"))
        assert main(["verify", str(path), str(cand), "--seeds", "1"]) == code
