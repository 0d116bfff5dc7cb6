"""fp32 GEMM at 4096^3 on the GPU: akg's Triton modules in plain fp32 and 3xTF32 against cuBLAS fp32
and cuBLAS TF32: time (CUDA events, L2 flushed, median of 30, contenders interleaved) and error
against float64 (max; the verifier's verdict under its fp32 rule, `policy.compare`; and how many
elements exceed the per-element rule it used before, on N(0,1) and on N(0,4) inputs).
python benchmarks/gpu/precision_gemm.py OUT.json"""

from __future__ import annotations

import importlib.util
import json
import statistics
import sys
import tempfile
from pathlib import Path

import torch

from akg_agent.translate import build, render
from akg_agent.verifier.policy import TolerancePolicy, compare
from ir.kernel.schedule import Schedule

N = 4096
PROBLEM = Path(__file__).resolve().parents[1] / "problems" / "gemm_fp32.py"
# akg's Triton GEMM with the tuned fp32 tile, and 3xTF32 with four tiles
SCHEDULES = {
    "ieee_128x256x32": Schedule(BM=128, BN=256, BK=32, GROUP_M=8, num_stages=2, num_warps=8),
    "tf32x3_128x128x32": Schedule(BM=128, BN=128, BK=32, GROUP_M=8, num_stages=3, num_warps=8,
                                  input_precision="tf32x3"),
    "tf32x3_128x256x32": Schedule(BM=128, BN=256, BK=32, GROUP_M=8, num_stages=3, num_warps=8,
                                  input_precision="tf32x3"),
    "tf32x3_128x128x64": Schedule(BM=128, BN=128, BK=64, GROUP_M=8, num_stages=3, num_warps=8,
                                  input_precision="tf32x3"),
    "tf32x3_64x128x64": Schedule(BM=64, BN=128, BK=64, GROUP_M=8, num_stages=4, num_warps=4,
                                 input_precision="tf32x3"),
}


def load(name: str, sched: Schedule | None, d: Path, problem: Path = PROBLEM, target: str = "h100",
         kind: str = "matmul"):
    """The module akg writes for `problem` with its `kind` kernels (GEMMs unless told) under `sched`, loaded
    (None: translate's own plan and schedules, the cost model's library choice included)."""
    t = build(problem, "triton", target, tuned=sched is None)
    if sched is not None:  # only those kernels take the schedule under test; a layout copy keeps its own
        gemms = {k.name for k in t.program.kernels() if k.kind == kind}
        t.schedules = {k: sched if k in gemms else s for k, s in t.schedules.items()}
    path = d / f"{name}.py"
    path.write_text(render(t))
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.ModelNew().cuda()


def cublas(tf32: bool):
    def f(a, b):
        old = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = tf32
        try:
            return a @ b
        finally:
            torch.backends.cuda.matmul.allow_tf32 = old
    return f


def main(out: str) -> None:
    fns = {"cublas_fp32": cublas(False), "cublas_tf32": cublas(True)}
    tmp = Path(tempfile.mkdtemp(prefix="akg-precision-"))
    for name, sched in SCHEDULES.items():
        fns[name] = load(name, sched, tmp)
    torch.manual_seed(0)
    rows: dict[str, dict] = {k: {} for k in fns}
    for label, scale in (("normal", 1.0), ("signed_x2", 2.0)):
        a, b = torch.randn(N, N, device="cuda") * scale, torch.randn(N, N, device="cuda") * scale
        r64 = a.double() @ b.double()
        ref = cublas(False)(a, b).double()
        own = (ref - r64).abs()
        for name, f in fns.items():
            got = f(a, b)
            err = (got.double() - r64).abs()
            verdict = compare(got, ref.float(), TolerancePolicy(), ref64=r64)
            rows[name][label] = {"max_abs_err": float(err.max()), "verifier_accepts": verdict.ok,
                                 "verifier_reason": verdict.reason,
                                 "over_old_per_element_rule": int((err > 1e-4 + 1e-4 * r64.abs() + own).sum())}
    a, b = torch.randn(N, N, device="cuda"), torch.randn(N, N, device="cuda")
    flush = torch.empty(256 * 1024 * 1024 // 4, device="cuda")
    times: dict[str, list[float]] = {k: [] for k in fns}
    for f in fns.values():
        for _ in range(3):
            f(a, b)
    for _ in range(30):
        for name, f in fns.items():
            flush.zero_()
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            f(a, b)
            e.record()
            torch.cuda.synchronize()
            times[name].append(s.elapsed_time(e) / 1e3)
    for name in fns:
        med = statistics.median(times[name])
        rows[name]["median_s"] = med
        rows[name]["tflops"] = 2 * N**3 / med / 1e12
        print(name, json.dumps(rows[name]), flush=True)
    Path(out).write_text(json.dumps({"device": torch.cuda.get_device_name(), "n": N, "rows": rows}, indent=1))


if __name__ == "__main__":
    main(sys.argv[1])
