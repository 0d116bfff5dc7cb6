"""Modules that keep state in buffers across calls, and random ops inside forward: the written module
updates its buffers as the reference does, draws the same numbers under the same seed, and the
verifier checks both."""

from __future__ import annotations

import importlib.util

import pytest
import torch

from akg_agent.translate import translate
from akg_agent.verifier import verify
from akg_agent.verifier.policy import TolerancePolicy
from akg_agent.verifier.worker import Reject, _check_state
from ir.problem import load_problem

from .conftest import problem_path


def _module(source: str, tmp_path, name: str):
    path = tmp_path / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def stateful_cpp():
    t = translate(problem_path("state_rnn_cell"), "cpp", "cpu", timing=False, seeds=(0, 1))
    assert t.verdict.accepted
    return t


def test_the_written_module_keeps_its_state_across_calls_like_the_reference(stateful_cpp, tmp_path):
    problem = load_problem(problem_path("state_rnn_cell"))
    ref = problem.build_model(0).eval()
    cand = _module(stateful_cpp.source, tmp_path, "rnn_cpp").ModelNew()
    cand.load_state_dict(ref.state_dict())
    with torch.no_grad():
        for call in range(3):
            x = torch.randn(4, 16)
            torch.testing.assert_close(cand(x), ref(x), rtol=1e-5, atol=1e-5, msg=f"call {call}")
            torch.testing.assert_close(cand.hidden, ref.hidden, rtol=1e-5, atol=1e-5)
            assert float(cand.steps) == float(ref.steps) == call + 1


def test_a_module_that_forgets_its_state_is_rejected(stateful_cpp, tmp_path):
    forgetful = stateful_cpp.source.replace("        _akg_get(self, 'hidden').copy_(tanh)\n", "")
    assert forgetful != stateful_cpp.source
    cand = tmp_path / "forgetful.py"
    cand.write_text(forgetful)
    v = verify(problem_path("state_rnn_cell"), cand, seeds=(0, 1, 2))
    assert not v.accepted and "seed 1" in v.reason  # right on the first call, wrong from the second


def test_buffers_are_compared_after_the_calls():
    class Counter(torch.nn.Module):
        def __init__(self, start: float):
            super().__init__()
            self.register_buffer("n", torch.tensor([start]))

    _check_state(Counter(3.0), Counter(3.0), TolerancePolicy(), 3)
    with pytest.raises(Reject, match="buffer 'n' after 3 calls differs"):
        _check_state(Counter(3.0), Counter(2.0), TolerancePolicy(), 3)


@pytest.mark.parametrize(("dsl", "target"), [("cpp", "cpu")])
def test_random_ops_draw_what_the_reference_draws_under_the_same_seed(dsl, target, tmp_path):
    t = translate(problem_path("rand_in_forward"), dsl, target, timing=False, seeds=(0, 1))
    assert t.verdict.accepted and "manual_seed" in t.verdict.details["rng"]
    assert "aten.randn" in t.verdict.details["library_calls"]
    problem = load_problem(problem_path("rand_in_forward"))
    ref = problem.build_model(0).eval()
    cand = _module(t.source, tmp_path, "rand_cpp").ModelNew()
    cand.load_state_dict(ref.state_dict())
    x = torch.randn(8, 32)
    with torch.no_grad():
        torch.manual_seed(5)
        want = ref(x)
        torch.manual_seed(5)
        got = cand(x)
        torch.manual_seed(6)
        other = cand(x)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    assert not torch.allclose(other, want)  # the draws are real: another seed, other numbers
