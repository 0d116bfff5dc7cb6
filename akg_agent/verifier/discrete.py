"""Discrete outputs judged by the values they were taken from.

A problem may declare (`AKG_DISCRETE_OUTPUTS`, written for torch.compile's training graphs) that an output
is a discontinuous function of a floating-point value, which the problem's `akg_discrete_values` computes
(torch's values, on the trial's inputs): a max pool's indices (per window, the flat position of its maximum
within a spatial plane of the pool's input) or a comparison with a constant (the `x <= 0` mask a ReLU's
backward reads). A kernel that rounds that value otherwise than torch may pick the other of two near-equal
maxima, or land on the other side of the constant: a valid subgradient either way. Where the candidate
differs from torch, a pool's index must lie inside its own window and point to a value as large as torch's
pick within the tolerance of the values' dtype, and a comparison must be one torch's value is within that
tolerance of the constant for; anything else is wrong.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from .policy import REDUCED_SLACK, Comparison, TolerancePolicy


def compare_discrete(cand: torch.Tensor, ref: torch.Tensor, values: torch.Tensor, exact: torch.Tensor | None,
                     spec: dict[str, Any], policy: TolerancePolicy) -> Comparison:
    """`cand` against `ref` (both in `spec["shape"]`), taken from `values` (torch's) as `spec` says. With
    `exact` (their float64 evaluation), twice torch's own largest error widens the tolerance, as for any
    output (`policy.REDUCED_SLACK`): a TF32 convolution before a ReLU moves values near zero by more than
    fp32's tolerance, torch's and ours alike."""
    own = float((values.double() - exact.to(values.device)).abs().max()) if exact is not None and \
        exact.shape == values.shape and values.numel() else 0.0
    if cand.numel() != ref.numel() or cand.dtype != ref.dtype:
        return Comparison(False, f"shape {tuple(cand.shape)} {cand.dtype}, expected {tuple(ref.shape)} {ref.dtype}")
    c, r = cand.detach().to(ref.device).reshape(spec["shape"]), ref.detach().reshape(spec["shape"])
    diff = c != r
    if not bool(diff.any()):
        return Comparison(True, "")
    atol, rtol = policy.for_dtype(values.dtype)
    atol += REDUCED_SLACK * own
    if spec["kind"] == "threshold":
        return _threshold(c, diff, values, spec, atol, rtol)
    return _pool(c, r, diff, values, spec, atol, rtol)


def _threshold(c: torch.Tensor, diff: torch.Tensor, values: torch.Tensor, spec: dict[str, Any], atol: float,
               rtol: float) -> Comparison:
    at = float(spec["at"])
    near = (values.detach().reshape(spec["shape"])[diff].double() - at).abs() <= atol + rtol * abs(at)
    if bool(near.all()):
        return Comparison(True, "")
    return Comparison(False, f"{int((~near).sum())} of {c.numel()} comparisons with {at:g} differ where torch's "
                             f"value is farther from it than atol {atol:g}, rtol {rtol:g}")


def _pool(c: torch.Tensor, r: torch.Tensor, diff: torch.Tensor, values: torch.Tensor, spec: dict[str, Any],
          atol: float, rtol: float) -> Comparison:
    """Indices into the last `len(spec["kernel"])` axes of `values`."""
    dev = r.device
    n = int(diff.sum())
    rank = len(spec["kernel"])
    plane = values.shape[-rank:]
    at = diff.nonzero()  # (n, rank of the indices): the windows where the picks differ
    ci, ri = c[diff].long(), r[diff].long()
    size = math.prod(plane)
    if bool(((ci < 0) | (ci >= size)).any()):
        return Comparison(False, f"{n} of {c.numel()} indices differ, some outside the {size} positions of a plane")
    # each differing index inside its own window: start = out * stride - padding, taps every dilation
    rest, inside = ci.clone(), torch.ones_like(ci, dtype=torch.bool)
    for d in reversed(range(rank)):
        pos, rest = rest % plane[d], rest // plane[d]
        off = pos - (at[:, at.shape[1] - rank + d] * spec["stride"][d] - spec["padding"][d])
        dil = spec["dilation"][d]
        inside &= (off >= 0) & (off <= (spec["kernel"][d] - 1) * dil) & (off % dil == 0)
    if not bool(inside.all()):
        return Comparison(False, f"{int((~inside).sum())} of {c.numel()} indices point outside their window")
    lead = at[:, :at.shape[1] - rank]
    flat = values.detach().reshape(-1, size)
    row = torch.zeros(len(at), dtype=torch.long, device=dev)
    for d, extent in enumerate(values.shape[:-rank]):
        row = row * extent + lead[:, d]
    vc, vr = flat[row, ci].double(), flat[row, ri].double()
    off = (vr - vc).abs() - (atol + rtol * vr.abs())
    if bool((off > 0).any()):
        return Comparison(False, f"{int((off > 0).sum())} of {c.numel()} indices point to a value below the "
                                 f"window's maximum by more than atol {atol:g}, rtol {rtol:g} "
                                 f"(up to {float((vr - vc).abs().max()):.3g})")
    return Comparison(True, "")
