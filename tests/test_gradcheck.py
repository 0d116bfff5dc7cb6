"""A training step checked and timed like an output (`verify(..., backward=True)`, `akg bench --backward`):
every gradient against float64's, a module whose backward is off by a term rejected by name, the step timed
against eager and torch.compile (AOTAutograd) in one run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from akg_agent.cli import main
from akg_agent.verifier import verify
from akg_agent.verifier.gradstep import GradStep, trained_names, what
from ir.errors import AkgError
from ir.problem import load_problem

PROBLEMS = Path(__file__).resolve().parent / "problems"
LN = PROBLEMS / "l2_gemm_gelu_softmax_layernorm.py"


def test_a_step_returns_autograds_gradients_along_a_direction_seeded_per_call():
    p = load_problem(LN)
    model = p.build_model(0)
    step = GradStep(model, trained_names(model))
    x = p.make_inputs(3)[0]
    torch.manual_seed(11)
    got = step(x)
    assert len(got) == 1 + 1 + 4 and not any(t.requires_grad for t in got)
    assert [what(step, i) for i in (0, 1, 2)] == ["output 0", "the gradient of input 0",
                                                  "the gradient of linear.weight"]
    xa = x.clone().requires_grad_(True)
    y = model(xa)
    g = torch.Generator().manual_seed(11)
    direction = torch.randn(y.shape, generator=g).to(torch.bfloat16).float()
    want = torch.autograd.grad(y, [xa, *model.parameters()], direction)
    for a, b in zip(got[1:], want):
        torch.testing.assert_close(a, b)
    torch.manual_seed(12)  # another call's seed: another direction
    assert not torch.equal(step(x)[1], got[1])
    # the float64 copy follows the same direction: its gradients within fp32's error of these
    torch.manual_seed(11)
    step64 = GradStep(model.double(), trained_names(model))
    for a, b in zip(step64(x.double())[1:], got[1:]):
        torch.testing.assert_close(a.float(), b, rtol=1e-4, atol=1e-5)


_OFF_BY_A_TERM = '''

AKG_LIBRARY_CALLS = ["aten.*"]


class _Through(torch.autograd.Function):
    """The value unchanged, its gradient 1% short (a term of a hand-written backward dropped)."""

    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, g):
        return g * 0.99


class ModelNew(Model):
    def forward(self, x):
        return _Through.apply(super().forward(x))
'''

_DETACHED = '''

AKG_LIBRARY_CALLS = ["aten.*"]


class ModelNew(Model):
    def forward(self, x):
        return super().forward(x).detach()
'''


@pytest.mark.parametrize("body,code,says", [
    (_OFF_BY_A_TERM, "wrong_values", "the gradient of input 0 wrong on seed"),
    (_DETACHED, "runtime_error", "no output carries a gradient")], ids=["off-by-a-term", "detached"])
def test_a_step_whose_gradients_are_wrong_is_rejected_by_name(body, code, says, tmp_path):
    """Forward values right, the backward off by 1%: a forward-only check accepts it, the gradient check
    names the first wrong gradient. A module that computes outside autograd is refused in one line."""
    cand = tmp_path / "cand.py"
    cand.write_text(LN.read_text() + body)
    assert verify(LN, cand).accepted
    v = verify(LN, cand, backward=True)
    assert not v.accepted and v.code == code and says in v.reason, v.line()


def test_a_jax_problem_has_no_gradient_check(tmp_path):
    jax_problem = Path(__file__).resolve().parent / "jax_problems"
    first = next(iter(sorted(jax_problem.glob("*.py"))), None)
    if first is None:
        pytest.skip("no JAX problem in the suite")
    with pytest.raises(AkgError, match=r"is a JAX problem: gradient checks \(--backward\) take a PyTorch Model"):
        verify(first, first, backward=True)


def test_bench_backward_translates_checks_every_gradient_and_times_the_step(tmp_path, monkeypatch, capsys):
    """`akg bench --backward --dsl cpp`: the problem written with --backward (both graphs C++), the step
    accepted with its gradients checked, timed beside eager's and torch.compile's training step."""
    monkeypatch.setenv("AKG_CACHE_DIR", str(tmp_path / "cache"))
    out = tmp_path / "out"
    assert main(["bench", str(LN), "--dsl", "cpp", "--backward", "--out", str(out), "--baselines", "eager,compile",
                 "--trials", "3"]) == 0
    doc = json.loads((out / "results.json").read_text())
    rec = doc["records"][0]
    assert doc["meta"]["backward"] is True
    assert rec["correct"], rec.get("reason")
    assert set(rec["baseline_ms"]) == {"eager", "compile"} and rec["candidate_ms"] > 0
    assert "AKG_LIBRARY_CALLS" in (out / "solutions" / LN.name).read_text()
    assert (out / "solutions" / f"{LN.stem}_akg" / "step.json").is_file()
    capsys.readouterr()
    assert main(["bench", str(LN), "--dsl", "cpp", "--backward", "--pure", "--out", str(tmp_path / "o2")]) != 0
    assert "--backward runs on this host and times the hybrid translation only" in capsys.readouterr().err


def test_a_model_with_batch_norm_is_written_for_training_its_statistics_updated(tmp_path):
    """`--backward` on a model whose training forward writes buffers (batch norm's running mean, variance
    and count): AOTAutograd sees them as inputs written into copies, the forward graph returns their new
    values and the written module copies them in. Gradients and statistics match eager's after a step; the
    verifier checks both (its state check compares buffers); in eval mode the module refuses in one line."""
    from akg_agent.backward import translate_backward

    problem = Path(__file__).resolve().parent / "fixtures" / "conv_bn_relu_train.py"
    out = tmp_path / "out.py"
    translate_backward(problem, "cpp", "cpu", out)
    assert json.loads((tmp_path / "out_akg" / "step.json").read_text())["buffers"] == [
        "bn.running_mean", "bn.running_var", "bn.num_batches_tracked"]
    assert verify(problem, out, backward=True, train=True, seeds=(0, 1)).accepted
    v = verify(problem, out, backward=True, seeds=(0,))
    assert not v.accepted and "written for training mode" in v.reason, v.line()

    import importlib.util
    spec = importlib.util.spec_from_file_location("written_bn", out)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    p = load_problem(problem)
    ref = p.build_model(0).train()
    new = mod.ModelNew().train()
    new.load_state_dict(ref.state_dict())
    x = p.make_inputs(5)[0]
    xa, xb = x.clone().requires_grad_(True), x.clone().requires_grad_(True)
    ya, yb = ref(xa), new(xb)
    g = torch.randn_like(ya)
    ya.backward(g)
    yb.backward(g)
    torch.testing.assert_close(yb, ya, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(xb.grad, xa.grad, rtol=1e-4, atol=1e-5)
    for (name, b), want in zip(new.named_buffers(), ref.buffers()):
        torch.testing.assert_close(b, want, rtol=1e-5, atol=1e-6, msg=lambda m, n=name: f"{n}: {m}")
    assert int(new.bn.num_batches_tracked) == 1


def test_dropout_written_with_backward_matches_eager_in_training_and_refuses_eval(tmp_path):
    """`--backward` on a model whose dropout is functional (no Dropout module to find): its forward graph
    draws random numbers, so the module is written for training only (in eval it refuses in one line, where
    it would apply dropout); in training its mask is eager's under the same seed, so outputs and gradients
    are checked value for value, as for any other model."""
    from akg_agent.backward import translate_backward

    problem = Path(__file__).resolve().parent / "fixtures" / "mlp_dropout_train.py"
    out = tmp_path / "out.py"
    translate_backward(problem, "cpp", "cpu", out)
    assert json.loads((tmp_path / "out_akg" / "step.json").read_text())["training_only"] is True
    assert verify(problem, out, backward=True, train=True, seeds=(0, 1)).accepted
    v = verify(problem, out, backward=True, seeds=(0,))
    assert not v.accepted and "written for training mode" in v.reason, v.line()
