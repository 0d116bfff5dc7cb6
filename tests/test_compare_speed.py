"""The verifier's comparison in fewer passes (`policy.py`): its one-pass tests agree with the exact ones
they stand in front of. `_spread_exceeds` rules out a degenerate reference only where no constant is
within tolerance of every value; `_all_finite` is exact for 16- and 32-bit floats."""

from __future__ import annotations

import math

import pytest
import torch

from akg_agent.verifier.policy import _all_finite, _spread_exceeds, is_degenerate


def _exact_degenerate(ref: torch.Tensor, atol: float, rtol: float) -> bool:
    """The definition: zeros or the mean of the finite values within tolerance of every finite value."""
    r = ref.double().reshape(-1)
    r = r[torch.isfinite(r)]
    if r.numel() < 2 or atol == 0.0:
        return False
    return any(bool(((r - c).abs() <= atol + rtol * r.abs()).all()) for c in (0.0, float(r.mean())))


CASES = {
    "zeros": torch.zeros(1000),
    "tiny noise": 1e-6 * torch.randn(1000, generator=torch.Generator().manual_seed(0)),
    "constant plus noise below": 3.0 + 1e-6 * torch.randn(1000, generator=torch.Generator().manual_seed(1)),
    "constant plus noise above": 3.0 + 1e-2 * torch.randn(1000, generator=torch.Generator().manual_seed(2)),
    "activations": torch.randn(4096, generator=torch.Generator().manual_seed(3)),
    "on the edge": torch.tensor([1.0, 1.0 + 2e-4 + 1e-4 * 2.0001]),
    "with a NaN": torch.tensor([1.0, float("nan"), 1.0 + 1e-6]),
    "with an inf": torch.tensor([0.0, float("inf"), 5.0]),
    "bf16 constant": torch.full((300,), 0.5, dtype=torch.bfloat16),
    "float64 constant plus noise": 2.0 + 1e-7 * torch.randn(500, dtype=torch.float64,
                                                           generator=torch.Generator().manual_seed(4)),
    "a NaN among spread values": torch.tensor([0.0, float("nan"), 5.0, -5.0]),
}


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("chunk", [7, 1 << 22])
def test_the_one_pass_degeneracy_test_agrees_with_the_definition(name, chunk):
    ref = CASES[name]
    assert is_degenerate(ref, 1e-4, 1e-4, chunk) == _exact_degenerate(ref, 1e-4, 1e-4)
    if _spread_exceeds([ref.reshape(-1)], 1e-4, 1e-4):  # it never rules out a degenerate reference
        assert not _exact_degenerate(ref, 1e-4, 1e-4)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
def test_all_finite_is_exact(dtype):
    big = torch.finfo(dtype).max
    for values, finite in (([1.0, -2.0], True), ([big, big, big], True), ([1.0, math.nan], False),
                           ([math.inf, 1.0], False), ([-math.inf, math.inf], False)):
        assert _all_finite(torch.tensor(values, dtype=dtype)) == finite, (dtype, values)
