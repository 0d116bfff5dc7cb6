"""Tolerance policy and output comparison: the rules that decide "correct".

A candidate is compared with a float64 evaluation of the reference where one exists, and each
element may differ from it by atol + rtol|x| plus the default-precision reference's largest own
error on that output (so a TF32 cuDNN reference does not fail an exact FP32 kernel, and a GEMM
summed in another order is not failed at the one element where torch's rounding happened to cancel).
Outputs a constant would pass are degenerate and get a relative check instead (a softmax over 16k
columns is ~6e-5 everywhere: zeros pass atol=1e-4).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

# KernelBench-main defaults
DEFAULT_TOLERANCES = {
    torch.float32: (1e-4, 1e-4),
    torch.float16: (1e-2, 1e-2),
    torch.bfloat16: (1e-2, 1e-2),
    torch.float64: (1e-7, 1e-7),
}


class Reject(Exception):
    def __init__(self, code: str, reason: str) -> None:
        super().__init__(reason)
        self.code, self.reason = code, reason


NOISE_SLACK = 8  # a degenerate output may carry this many times the reference's own rounding noise
# Another valid rounding sequence (a fused kernel keeping fp32 between ops, another summation order) errs
# as much as torch's own does, so its largest error exceeds torch's largest about half the time (a chained
# model's tail; an fp32 GRU's or a batch norm's ill-conditioned gradient, where torch itself is off by more
# than the tolerance). Each value may differ from float64 by REDUCED_SLACK times torch's largest error past
# the tolerance. bf16/fp16 also: the root-mean-square error may be at most REDUCED_SLACK times torch's
# (plus a tenth of atol): a kernel that rounds where torch does not (bf16 accumulation, a bf16 intermediate
# torch keeps in fp32) errs more everywhere, not only in a tail. (Not fp32: a 3xTF32 GEMM errs a few times
# more than an FMA one everywhere, and stays within fp32's tolerance.)
REDUCED = (torch.bfloat16, torch.float16)
REDUCED_SLACK = 2.0


@dataclass(frozen=True)
class TolerancePolicy:
    name: str = "kernelbench-main"
    overrides: dict[str, tuple[float, float]] = field(default_factory=dict)  # dtype name -> (atol, rtol)
    # the precision the program computes in where it is narrower than its outputs (`AKG_COMPUTES_IN`: a
    # graph under torch.autocast returns fp32 values that went through bf16 matmuls): its wider float
    # outputs are judged by that precision's rules
    computes_in: torch.dtype | None = None

    def for_dtype(self, dtype: torch.dtype) -> tuple[float, float]:
        key = str(dtype).replace("torch.", "")
        if key in self.overrides:
            return self.overrides[key]
        if self.through_reduced(dtype):
            return DEFAULT_TOLERANCES[self.computes_in]  # type: ignore[index]
        return DEFAULT_TOLERANCES.get(dtype, (0.0, 0.0))  # integers and bools: exact

    def through_reduced(self, dtype: torch.dtype) -> bool:
        """Whether outputs of `dtype` went through the narrower precision the program computes in."""
        return (self.computes_in in REDUCED and dtype.is_floating_point and dtype not in REDUCED
                and str(dtype).replace("torch.", "") not in self.overrides)


def job_policy(job: dict, module: object) -> TolerancePolicy:
    """The policy of one verification: the job's tolerance overrides, the problem's `AKG_COMPUTES_IN`."""
    low = getattr(module, "AKG_COMPUTES_IN", None)
    return TolerancePolicy(overrides={k: tuple(v) for k, v in job.get("tolerances", {}).items()},
                           computes_in=getattr(torch, low) if low in ("bfloat16", "float16") else None)


@dataclass
class Comparison:
    ok: bool
    reason: str = ""
    max_abs_err: float = 0.0
    max_rel_err: float = 0.0
    degenerate: bool = False
    ref_max_abs_err: float = 0.0  # the default-numerics reference's own error against float64


def _name(dtype: torch.dtype | None) -> str:
    return str(dtype).replace("torch.", "")


def _finite_mask_problem(cand: torch.Tensor, ref: torch.Tensor) -> str:
    if not torch.equal(torch.isnan(cand), torch.isnan(ref)):
        n = int((torch.isnan(cand) != torch.isnan(ref)).sum())
        return f"NaN in {n} places where the reference has none (or the reverse)"
    ci, ri = torch.isinf(cand), torch.isinf(ref)
    if not torch.equal(ci, ri) or not torch.equal(cand[ci] > 0, ref[ri] > 0):
        return "Inf in different places (or signs) than the reference"
    return ""


def is_degenerate(ref: torch.Tensor, atol: float, rtol: float, chunk: int = 1 << 22) -> bool:
    """True when a constant output (zeros, or the reference's mean) would pass the plain check. Swept
    in chunks: a float64 copy of a large output would not fit beside it."""
    flat = ref.detach().reshape(-1)
    chunks = [flat[lo:lo + chunk] for lo in range(0, flat.numel(), chunk)]
    if flat.numel() < 2 or atol == 0.0:
        return False
    if _spread_exceeds(chunks, atol, rtol):
        return False

    def finite(x: torch.Tensor) -> torch.Tensor:  # masked only where needed: a gather costs more than the sum
        r = x.double()
        return r if bool(torch.isfinite(r).all()) else r[torch.isfinite(r)]

    count, total = 0, 0.0
    for x in chunks:
        f = finite(x)
        count, total = count + f.numel(), total + float(f.sum())
    if count < 2 or atol == 0.0:
        return False
    for c in (0.0, total / count):
        if all(bool(((f - c).abs() <= atol + rtol * f.abs()).all()) for f in map(finite, chunks)):
            return True
    return False


def _all_finite(x: torch.Tensor) -> bool:
    """Every value finite: one float64 sum, finite exactly then, for 16- and 32-bit floats (no mask made);
    float64 values, whose sum may overflow, are tested one by one."""
    if x.dtype == torch.float64 or x.is_complex():
        return bool(torch.isfinite(x).all())
    return math.isfinite(float(x.sum(dtype=torch.float64)))


def _spread_exceeds(chunks: list[torch.Tensor], atol: float, rtol: float) -> bool:
    """Whether no constant can be within tolerance of every value: a constant c within atol + rtol|v| of
    the largest value and of the smallest bounds their spread by 2 atol + rtol (|max| + |min|). One pass
    per chunk against the dozen of the exact check, which a real output (the usual case) never needs; a NaN
    or an infinity (aminmax carries them) leaves the decision to the exact check."""
    lo, hi = math.inf, -math.inf
    for x in chunks:
        if x.is_complex():
            return False
        a, b = (float(v) for v in torch.aminmax(x))
        if not (math.isfinite(a) and math.isfinite(b)):
            return False
        lo, hi = min(lo, a), max(hi, b)
    return hi - lo > (2 * atol + rtol * (abs(hi) + abs(lo))) * (1 + 1e-6)


def compare(cand: torch.Tensor, ref: torch.Tensor, policy: TolerancePolicy,
            ref64: torch.Tensor | None = None, degenerate: bool | None = None, chunk: int = 1 << 22) -> Comparison:
    """Compare one output. `ref` is the reference in its default numerics; `ref64` the float64
    evaluation when available. `degenerate`: already judged (None: judged here, on the whole output).
    Swept in chunks of `chunk` elements on the outputs' device, so the float64 copies stay that size
    and a large GPU output is not compared on the host; the verdict is the whole output's."""
    if not isinstance(cand, torch.Tensor):
        return Comparison(False, f"output is a {type(cand).__name__}, not a tensor")
    if tuple(cand.shape) != tuple(ref.shape):
        return Comparison(False, f"shape {tuple(cand.shape)}, expected {tuple(ref.shape)}")
    if cand.dtype != ref.dtype:
        return Comparison(False, f"dtype {cand.dtype}, expected {ref.dtype}")
    dev = cand.device if cand.device == ref.device else torch.device("cpu")
    atol, rtol = policy.for_dtype(ref.dtype)
    if not (ref.is_floating_point() or ref.is_complex()):
        ok = torch.equal(cand.detach().to(dev), ref.detach().to(dev))
        return Comparison(ok, "" if ok else f"{int((cand.to(dev) != ref.to(dev)).sum())} integer elements differ")
    if degenerate is None:
        degenerate = is_degenerate(ref, atol, rtol, chunk)
    fc, fr = cand.detach().reshape(-1), ref.detach().reshape(-1)
    f64 = ref64.detach().reshape(-1) if ref64 is not None else None

    def chunks():
        for lo in range(0, fc.numel(), chunk):
            c, r = fc[lo:lo + chunk].to(dev), fr[lo:lo + chunk].to(dev)
            w = f64[lo:lo + chunk].to(dev) if f64 is not None else None
            if _all_finite(r):  # the usual case: no masked gathers (most of a large comparison's time)
                rd = r.double()
                yield _all_finite(c), c, r, c.double(), rd, w.double() if w is not None else rd
            else:
                fin = torch.isfinite(r)
                rd = r[fin].double()
                yield False, c, r, c[fin].double(), rd, w[fin].double() if w is not None else rd

    # one sweep: the reference's own rounding error (TF32 convolutions, a summation order) over the whole
    # output is the floor below which a difference is numerics, not a bug; each value's excess over
    # the plain tolerance is kept as its maximum, so the floor applies after the sweep
    own_max = own2 = 0.0
    max_abs = max_rel = peak = err2 = ref2 = 0.0
    reduced = (ref.dtype in REDUCED or policy.through_reduced(ref.dtype)) and ref64 is not None
    slack = REDUCED_SLACK if ref64 is not None else 1.0
    excess = -math.inf
    for clean, c, r, cd, rd, r64 in chunks():
        problem = "" if clean else _finite_mask_problem(c, r)
        if problem:
            return Comparison(False, problem)
        if not rd.numel():
            continue
        own = (rd - r64).abs_()
        own_max, own2 = max(own_max, float(own.max())), own2 + float(torch.dot(own, own))
        err = (cd - r64).abs_()
        mag = r64.abs()
        max_abs = max(max_abs, float(err.max()))
        max_rel = max(max_rel, float((err / mag.clamp_min(1e-30)).max()))
        err2 = err2 + float(torch.dot(err, err))
        if degenerate:
            peak = max(peak, float(mag.max()))
            ref2 = ref2 + float(torch.dot(r64, r64))
        else:
            excess = max(excess, float(torch.add(err, mag, alpha=-rtol).max()) - atol)
    n_bad = 0
    floor = slack * own_max
    if not degenerate and excess > floor * (1 - 1e-9) - 1e-300:  # near or past the floor: count exactly
        n_bad = sum(int((cd - r64).abs().gt(atol + rtol * r64.abs() + floor).sum()) for *_, cd, _, r64 in chunks())
    if degenerate:
        # relative check: the error must be small against the values themselves, or rounding noise of
        # the size the reference's own makes (an output near zero is all noise, and another valid
        # summation order makes noise a few times larger)
        norm = ref2 ** 0.5 or 1.0
        rel_l2 = err2 ** 0.5 / norm
        ok = rel_l2 <= rtol + NOISE_SLACK * own2 ** 0.5 / norm and max_abs <= rtol * peak + NOISE_SLACK * own_max
        reason = "" if ok else (f"degenerate reference (a constant passes {atol:g}); relative error "
                                f"{rel_l2:.3g} > {rtol:g}")
        return Comparison(ok, reason, max_abs, max_rel, True, own_max)
    if n_bad:
        own = f"; torch's own error up to {own_max:.3g}" if own_max else ""  # noise, or a bug: the reader can tell
        return Comparison(False, f"{n_bad} of {fc.numel()} values off by up to {max_abs:.3g} "
                                 f"(atol {atol:g}, rtol {rtol:g}{own})", max_abs, max_rel)
    n = max(1, fc.numel())
    rms, own_rms = (err2 / n) ** 0.5, (own2 / n) ** 0.5
    if reduced and rms > REDUCED_SLACK * own_rms + atol / 10:
        low = policy.computes_in if policy.through_reduced(ref.dtype) else ref.dtype
        return Comparison(False, f"root-mean-square error {rms:.3g} against float64, more than {REDUCED_SLACK:g}x "
                                 f"torch's own {own_rms:.3g} in {_name(low)}: rounded where torch does not",
                          max_abs, max_rel)
    return Comparison(True, "", max_abs, max_rel, ref_max_abs_err=own_max)
