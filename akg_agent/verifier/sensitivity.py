"""Does an fp32 output follow its inputs at fp32's resolution?

A forgiving fp32 program (a GEMM, a sigmoid, a GEMM, a logsumexp) moves by less than atol = rtol = 1e-4
when its inputs are rounded to bfloat16, so a module that computes from rounded inputs passes the value
check, and an error rule against torch's own cannot tell it from an honest kernel that sums in another
order (a sequential fp32 sum errs many times torch's pairwise one, and is still fp32).

So the inputs are moved below bf16's resolution and the answer must move with them: a base input set
whose values bf16 holds exactly, and the same set with each value nudged by 2^-10 of itself, less than
half a unit in bf16's last place. Whatever rounds its inputs to bf16 sees the same numbers twice and
answers the same twice; fp32 and float64 see the nudge. (A nudge below fp16's and TF32's half unit,
2^-12, would catch those too, but moves a forgiving output too little against fp32's own noise for a
conclusive test; their errors are a quarter of bf16's and the value check is left to judge them.) The
candidate's change of output is regressed on float64's: an honest fp32 module's slope is 1 within its
rounding noise, a rounding one's 0. Torch's fp32 reference is the control: where its own slope is not 1
within a small error (a TF32 cuDNN convolution, an output the nudge barely moves against fp32's noise),
the test says nothing and the candidate is not judged by it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

NUDGE = 2.0 ** -10  # relative: below half an ulp of bf16 (8 significant bits)
SLOPE_MISS = 0.5  # a candidate's slope further than this from 1 does not follow the inputs
CONTROL_SE = 0.05  # the control's slope error (spread / sqrt(n)) at most this for a conclusive test
CONTROL_BIAS = 0.1  # and its slope within this of 1


def base_and_nudged(inputs: list[object], seed: int) -> tuple[list[object], list[object]]:
    """The base set (float32 tensors rounded to bf16, so bf16 holds them exactly) and the nudged one (each
    value times 1 +- NUDGE, exact in fp32); other inputs are passed as they are."""
    base: list[object] = []
    nudged: list[object] = []
    for x in inputs:
        if isinstance(x, torch.Tensor) and x.dtype == torch.float32:
            b = x.to(torch.bfloat16).to(torch.float32)
            g = torch.Generator(device=b.device).manual_seed(seed)
            sign = torch.randint(0, 2, b.shape, generator=g, device=b.device, dtype=torch.int8)
            base.append(b)
            nudged.append(b * (1 + NUDGE * (2 * sign.to(torch.float32) - 1)))
        else:
            base.append(x)
            nudged.append(x)
    return base, nudged


def applies(inputs: list[object]) -> bool:
    """fp32 tensors in (the fp32 outputs are the ones regressed)."""
    return any(isinstance(x, torch.Tensor) and x.dtype == torch.float32 for x in inputs)


@dataclass(frozen=True)
class Response:
    slope: float  # least-squares slope of the output's change on float64's
    spread: float  # the residual's norm over float64's change's norm
    n: int  # values compared

    @property
    def slope_error(self) -> float:
        return self.spread / math.sqrt(max(1, self.n))


def response(before: list[torch.Tensor], after: list[torch.Tensor], ref_before: list[torch.Tensor],
             ref_after: list[torch.Tensor]) -> Response | None:
    """How one module's fp32 outputs moved between the two sets, against float64's move; None where
    float64's outputs did not move at all (nothing to regress on)."""
    cross = sq = res2 = 0.0
    n = 0
    for c0, c1, r0, r1 in zip(before, after, ref_before, ref_after):
        if not (isinstance(c0, torch.Tensor) and c0.dtype == torch.float32 and c0.shape == r0.shape):
            continue
        r0d, r1d = r0.detach().to(c0.device).double(), r1.detach().to(c0.device).double()
        dc = c1.detach().double() - c0.detach().double()
        dr = r1d - r0d
        ok = torch.isfinite(dc) & torch.isfinite(dr)
        dc, dr = dc[ok], dr[ok]
        cross, sq, n = cross + float((dc * dr).sum()), sq + float(dr.square().sum()), n + int(dc.numel())
        res2 += float((dc - dr).square().sum())
    if sq == 0.0:
        return None
    return Response(cross / sq, math.sqrt(res2 / sq), n)


def judge(candidate: Response | None, control: Response | None) -> str:
    """The reason to reject, or "" (followed, or the test is not conclusive for this program)."""
    if candidate is None or control is None:
        return ""
    if abs(control.slope - 1) > CONTROL_BIAS or control.slope_error > CONTROL_SE:
        return ""
    if abs(candidate.slope - 1) <= SLOPE_MISS:
        return ""
    return (f"the output does not follow a change of the fp32 inputs below bfloat16's resolution (slope "
            f"{candidate.slope:.2f} of float64's move, torch's fp32 {control.slope:.2f}): it computes from "
            "values rounded to a lower precision")
