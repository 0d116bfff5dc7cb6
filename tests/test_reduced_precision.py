"""The verifier's bf16/fp16 rule: another valid rounding sequence passes, a kernel that rounds where torch does
not fails; and the float64 evaluation of a program that casts to bf16 itself (a graph dynamo captured from a
bf16 model) widens its casts instead of giving up."""

from __future__ import annotations

import copy

import pytest
import torch

from akg_agent.verifier.policy import TolerancePolicy, compare
from akg_agent.verifier.reference import run_float64


def _gemms(seed: int):
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(64, 4096, generator=g).bfloat16()
    b = torch.randn(4096, 64, generator=g).bfloat16() / 64
    exact = a.double() @ b.double()
    torch_bf16 = (a @ b)  # fp32 accumulation, one rounding: torch's own answer
    other_order = sum(a[:, k:k + 512].float() @ b[k:k + 512].float() for k in range(0, 4096, 512)).bfloat16()
    acc = torch.zeros(64, 64, dtype=torch.bfloat16)
    for k in range(0, 4096, 64):  # accumulates in bf16: rounds after every 64 products
        acc = (acc.float() + a[:, k:k + 64].float() @ b[k:k + 64].float()).bfloat16()
    return exact, torch_bf16, other_order, acc


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_another_valid_rounding_passes_and_rounding_in_the_wrong_place_fails(seed):
    exact, ref, other, bf16_accumulation = _gemms(seed)
    policy = TolerancePolicy()
    assert compare(ref, ref, policy, exact).ok  # torch's own answer
    assert compare(other, ref, policy, exact).ok  # fp32 accumulation in another order, one rounding
    bad = compare(bf16_accumulation, ref, policy, exact)
    assert not bad.ok and ("root-mean-square" in bad.reason or "values off" in bad.reason), bad.reason


def test_a_tail_past_torchs_largest_error_is_rounding_in_bf16_not_a_bug():
    """Two valid roundings of a chained computation: the other one's largest error may pass torch's (the
    fp32 rule's floor); within twice torch's largest and the same RMS it passes in bf16."""
    g = torch.Generator().manual_seed(3)
    exact = torch.randn(4096, dtype=torch.float64, generator=g)
    ref = (exact + 0.004 * torch.randn(4096, dtype=torch.float64, generator=g)).bfloat16()
    other = (exact + 0.004 * torch.randn(4096, dtype=torch.float64, generator=g)).bfloat16()
    own = float((ref.double() - exact).abs().max())
    other_err = (other.double() - exact).abs()
    other_err_max = float(other_err.max())
    if other_err_max <= own:  # make the tail exceed torch's largest error, as a chain of roundings does
        i = int(other_err.argmax())
        other[i] = (exact[i] + 1.5 * own * torch.sign(other.double()[i] - exact[i])).bfloat16()
    assert compare(other, ref, TolerancePolicy(), exact).ok
    far = other.clone()
    far[0] = (exact[0] + 0.01 + 0.01 * exact[0].abs() + 3 * own).bfloat16()  # three times torch's worst: a bug
    assert not compare(far, ref, TolerancePolicy(), exact).ok


class _CastsItself(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.softmax(x.float(), dim=-1).to(torch.bfloat16)  # HF's attention: softmax in fp32, back to bf16
        return y @ x.transpose(0, 1) + torch.full((x.shape[0], x.shape[0]), 0.5, dtype=torch.bfloat16)


def test_the_float64_evaluation_widens_a_programs_own_casts():
    x = torch.randn(8, 32).bfloat16()
    m64 = copy.deepcopy(_CastsItself()).double()
    with pytest.raises(RuntimeError):
        m64(x.double())  # its cast meets float64 in a matmul: plain float64 evaluation fails
    (y64,) = run_float64(m64, [x.double()])
    want = torch.softmax(x.double(), dim=-1) @ x.double().T + 0.5
    assert y64.dtype == torch.float64 and torch.allclose(y64, want, rtol=1e-12, atol=1e-12)


class _AutocastGraph(torch.nn.Module):
    def forward(self, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        # an autocast graph's casts: they run in float64 without an error, and round as torch does
        return torch.relu(x.to(torch.bfloat16) @ w.to(torch.bfloat16).T)


def test_an_autocast_graphs_float64_evaluation_is_widened_from_the_start():
    """A ResNet's bf16 activation on the H200 was judged against torch alone (no floor: 4% of values off by
    2 bf16 steps rejected): its casts ran as written, the float64 evaluation as rounded as torch's."""
    x, w = torch.randn(64, 128), torch.randn(32, 128)
    m64 = _AutocastGraph().double()
    (plain,) = run_float64(m64, [x.double(), w.double()])
    (wide,) = run_float64(m64, [x.double(), w.double()], widen=True)
    exact = torch.relu(x.double() @ w.double().T)
    assert plain.dtype == torch.bfloat16 and wide.dtype == torch.float64
    assert torch.allclose(wide, exact, rtol=1e-12, atol=1e-12) and not torch.allclose(plain.double(), exact)


def test_fp32_outputs_of_a_program_that_computes_in_bf16_are_judged_by_bf16_rules():
    """An fp32 output that went through bf16 (autocast): another valid rounding order errs as much as torch's
    own, a value past twice torch's largest error within bf16's tolerance (by fp32's rules: wrong); one
    that rounds far more than torch does everywhere is still caught."""
    import torch

    from akg_agent.verifier.policy import TolerancePolicy, compare

    g = torch.Generator().manual_seed(0)
    exact = torch.randn(4096, generator=g, dtype=torch.float64) * 10
    noise = torch.randn(4096, generator=g, dtype=torch.float64) * 0.02  # bf16-sized errors at |x| ~ 10
    ref = (exact + noise).float()
    other = noise.flip(0)
    other[7] = noise.abs().max() * 2.5  # one value past twice torch's largest error: fp32's floor
    cand = (exact + other).float()
    assert not compare(cand, ref, TolerancePolicy(), exact).ok
    policy = TolerancePolicy(computes_in=torch.bfloat16)
    assert compare(cand, ref, policy, exact).ok
    assert not compare((exact + 5 * noise.flip(0)).float(), ref, policy, exact).ok  # 5x torch's error everywhere
    explicit = TolerancePolicy(overrides={"float32": (1e-4, 1e-4)}, computes_in=torch.bfloat16)
    assert not compare(cand, ref, explicit, exact).ok  # an explicit fp32 tolerance wins


NORMS = {  # op: (its IR attrs, torch's call, the operands after x), on [2, 8, 16, 64]
    "layer_norm": ({"normalized_shape": [16, 64], "eps": 1e-5},
                   lambda x, w, b: torch.nn.functional.layer_norm(x, [16, 64], w, b), ("w2", "b2")),
    "rms_norm": ({"normalized_shape": [16, 64], "eps": 1e-6},
                 lambda x, w: torch.nn.functional.rms_norm(x, [16, 64], w, eps=1e-6), ("w2",)),
    "group_norm": ({"groups": 4, "eps": 1e-5}, lambda x, w, b: torch.nn.functional.group_norm(x, 4, w, b),
                   ("w1", "b1")),
    "batch_norm": ({"training": False, "eps": 1e-5},
                   lambda x, w, b, m, v: torch.nn.functional.batch_norm(x, m, v, w, b, False),
                   ("w1", "b1", "m1", "v1")),
    "softmax": ({"dim": -1}, lambda x: torch.softmax(x, -1), ()),
    "log_softmax": ({"dim": -1}, lambda x: torch.log_softmax(x, -1), ()),
}


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("op", sorted(NORMS))
def test_a_16_bit_normalisation_keeps_fp32_statistics_and_rounds_once_as_torch(op, dtype):
    """torch's norm and softmax kernels compute statistics, the normalised value and the affine in fp32 and
    round once: the IR's meaning of a 16-bit norm is the same (rounding the mean, the variance and each step
    in bf16 was 3.5x torch's own error on a layer norm, 1.6-1.9x on a softmax and a log-softmax)."""
    from ir.decompose import DECOMPOSITIONS  # noqa: F401 - registers the composites' meanings
    from ir.interp import EvalCtx, eval_op
    from ir.ops import normalize_attrs

    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 8, 16, 64, generator=g) * 3 + 1
    operands = {"w2": torch.randn(16, 64, generator=g), "b2": torch.randn(16, 64, generator=g),
                "w1": torch.randn(8, generator=g), "b1": torch.randn(8, generator=g),
                "m1": torch.randn(8, generator=g), "v1": torch.rand(8, generator=g) + 0.5}
    attrs, call, names = NORMS[op]
    args = [x.to(dtype), *(operands[n].to(dtype) for n in names)]
    exact = call(*(a.double() for a in args))
    theirs = call(*args)
    ours = eval_op(op, args, normalize_attrs(op, attrs), EvalCtx())
    assert ours.dtype == dtype
    err, torch_err = ((v.double() - exact).abs().max().item() for v in (ours, theirs))
    assert err <= 1.25 * torch_err, (err, torch_err)
