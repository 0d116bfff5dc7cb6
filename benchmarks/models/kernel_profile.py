"""Where a model's time goes: the GPU kernels of eager, inductor and akg, per call, side by side.

For each model and contender: the calls' wall time, the GPU time its kernels add up to (their gap is
launch overhead), the number of kernels a call launches, and the kernels that take most of the time,
each with its share. akg's written modules are copied beside the report, so a slow kernel can be read.

    python benchmarks/models/kernel_profile.py --sizing gpu --dtype bf16 --models gpt2,llama --out runs/prof

`--host` adds the host's side: the Python functions a call spends its time in (cProfile, own time), for a
contender whose wall time exceeds its GPU time. `--train` profiles a training step instead (forward, a
mean-square loss, backward; fp32 master weights, bf16 through autocast as `train.py` trains).
"""

from __future__ import annotations

import argparse
import json
import sys
import tarfile
import time
from pathlib import Path
from typing import Any

import torch
from torch.profiler import ProfilerActivity, profile

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[1]))

import zoo  # noqa: E402
from run import contender  # noqa: E402

from akg_agent.bench.provenance import provenance  # noqa: E402
from hardware_models.spec import cache_dir  # noqa: E402


def kernels(fn: Any, xs: list[torch.Tensor], calls: int) -> dict[str, Any]:
    """One contender's kernels over `calls` calls: per-call GPU time, count and the largest ones."""
    for _ in range(3):
        fn(*xs)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA, ProfilerActivity.CPU]) as prof:
        t0 = time.perf_counter()
        for _ in range(calls):
            fn(*xs)
        torch.cuda.synchronize()
        wall = (time.perf_counter() - t0) / calls
    rows = [e for e in prof.key_averages() if e.device_type == torch.autograd.DeviceType.CUDA]
    gpu = sum(e.self_device_time_total for e in rows) / calls / 1e6
    top = sorted(rows, key=lambda e: e.self_device_time_total, reverse=True)[:25]
    return {"wall_s": wall, "gpu_s": gpu, "kernels_per_call": sum(e.count for e in rows) / calls,
            "top": [{"kernel": e.key[:160], "us_per_call": e.self_device_time_total / calls,
                     "share": e.self_device_time_total / calls / 1e6 / gpu if gpu else 0.0,
                     "count_per_call": e.count / calls} for e in top]}


def host(fn: Any, xs: list[torch.Tensor], calls: int) -> list[dict[str, Any]]:
    """The Python functions `calls` calls spend their host time in: own time per call, the 25 largest."""
    import cProfile
    import pstats

    torch.cuda.synchronize()
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(calls):
        fn(*xs)
    prof.disable()
    torch.cuda.synchronize()
    stats = pstats.Stats(prof).stats  # (file, line, name) -> (calls, primitive calls, own, cumulative, callers)
    rows = sorted(stats.items(), key=lambda kv: kv[1][2], reverse=True)[:25]
    return [{"function": f"{Path(f).name}:{line} {name}", "own_us_per_call": own / calls * 1e6,
             "cum_us_per_call": cum / calls * 1e6, "count_per_call": n / calls}
            for (f, line, name), (n, _, own, cum, _) in rows]


def step_of(fn: Any, model: torch.nn.Module, dtype: str) -> Any:
    """A training step of `fn` (its gradients dropped first, as `zero_grad` does)."""
    def step(*xs: torch.Tensor) -> None:
        for q in model.parameters():
            q.grad = None
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=dtype == "bf16"):
            out = fn(*xs)
        out.float().square().mean().backward()
    return step


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizing", choices=sorted(zoo.SIZINGS), default="gpu")
    p.add_argument("--dtype", choices=sorted(zoo.DTYPES), default="bf16")
    p.add_argument("--models", default="gpt2,llama")
    p.add_argument("--modes", default="eager,inductor,akg")
    p.add_argument("--calls", type=int, default=10)
    p.add_argument("--dsl", default="", help="akg's DSL (default: the target's own)")
    p.add_argument("--host", action="store_true", help="also the host's Python functions per call (cProfile)")
    p.add_argument("--train", action="store_true", help="a training step (forward and backward), not a forward")
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args(argv)
    if not torch.cuda.is_available():
        raise SystemExit("kernel_profile.py reads GPU kernels: run it where torch.cuda.is_available()")
    torch._dynamo.config.allow_rnn = True
    args.out.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {"meta": {"sizing": args.sizing, "dtype": args.dtype, "train": args.train, "dsl": args.dsl,
                                       **provenance(["benchmarks/models/kernel_profile.py", *(argv or sys.argv[1:])])},
                              "models": {}}
    lines = []
    for name in args.models.split(","):
        model, xs = zoo.build(name, args.sizing, "fp32" if args.train else args.dtype)
        model, xs = model.cuda().train(args.train), [x.cuda() for x in xs]
        rec = report["models"].setdefault(name, {})
        with torch.enable_grad() if args.train else torch.no_grad():
            for mode in args.modes.split(","):
                torch._dynamo.reset()
                compiled = contender(mode, model, args.dsl)
                fn = step_of(compiled, model if mode == "eager" else compiled, args.dtype) if args.train else compiled
                t0 = time.perf_counter()
                fn(*xs)
                torch.cuda.synchronize()
                rec[mode] = {"first_call_s": time.perf_counter() - t0, **kernels(fn, xs, args.calls)}
                if args.host:
                    rec[mode]["host"] = host(fn, xs, args.calls)
                if mode.startswith("akg"):
                    rec[mode]["graphs"] = [g.line() for g in compiled.akg_report.graphs]
                    rec[mode]["notes"] = [n for g in compiled.akg_report.graphs for n in g.notes]
                r = rec[mode]
                what = f"{args.dtype} train" if args.train else args.dtype
                lines.append(f"== {name} {what} {mode}: wall {r['wall_s'] * 1e3:.3f} ms, gpu "
                             f"{r['gpu_s'] * 1e3:.3f} ms, {r['kernels_per_call']:.0f} kernels/call, "
                             f"first {r['first_call_s']:.1f} s")
                lines += [f"   {k['us_per_call']:9.1f} us {k['share'] * 100:5.1f}% x{k['count_per_call']:.0f} "
                          f"{k['kernel']}" for k in r["top"]]
                lines += [f"   host {h['own_us_per_call']:8.1f} us own {h['cum_us_per_call']:8.1f} us cum "
                          f"x{h['count_per_call']:.0f} {h['function']}" for h in r.get("host", [])]
                print("\n".join(lines[-51:]), flush=True)
    cache = cache_dir() / "compiled"
    if cache.is_dir():  # the written modules, to read the slow kernels in (not their graphs: those hold weights)
        with tarfile.open(args.out / "akg-modules.tar.gz", "w:gz") as tar:
            for module in sorted(cache.glob("*/module.py")):
                tar.add(module, arcname=f"{module.parent.name}/module.py")
    (args.out / "kernel_profile.json").write_text(json.dumps(report, indent=1, default=str))
    (args.out / "kernel_profile.txt").write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
