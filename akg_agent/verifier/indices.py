"""A max pool's indices judged by what they point to.

A problem may declare (`AKG_INDEX_OUTPUTS`, written for torch.compile's training graphs) that an
integer output holds, per window, the flat position of its maximum within a spatial plane of the pool's
input, which the problem's `akg_index_values` computes (torch's values, on the trial's inputs). A kernel
that rounds the pool's input otherwise than torch may pick the other of two near-equal maxima: a valid
subgradient either way. Where the candidate's index differs from torch's, it must lie inside its own
window and point to a value as large as torch's pick within the tolerance of the values' dtype; anything
else is wrong.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from .policy import Comparison, TolerancePolicy


def compare_indices(cand: torch.Tensor, ref: torch.Tensor, values: torch.Tensor, spec: dict[str, Any],
                    policy: TolerancePolicy) -> Comparison:
    """`cand` against `ref`: indices into the last `len(spec["kernel"])` axes of `values` (torch's)."""
    if cand.shape != ref.shape or cand.dtype != ref.dtype:
        return Comparison(False, f"shape {tuple(cand.shape)} {cand.dtype}, expected {tuple(ref.shape)} {ref.dtype}")
    dev = ref.device
    c, r = cand.detach().to(dev), ref.detach()
    diff = c != r
    n = int(diff.sum())
    if not n:
        return Comparison(True, "")
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
    atol, rtol = policy.for_dtype(values.dtype)
    off = (vr - vc).abs() - (atol + rtol * vr.abs())
    if bool((off > 0).any()):
        return Comparison(False, f"{int((off > 0).sum())} of {c.numel()} indices point to a value below the "
                                 f"window's maximum by more than atol {atol:g}, rtol {rtol:g} "
                                 f"(up to {float((vr - vc).abs().max()):.3g})")
    return Comparison(True, "")
