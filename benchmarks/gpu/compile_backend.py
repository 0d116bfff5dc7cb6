"""torch.compile(backend="akg") against eager and torch.compile's default (inductor) on three models at
GPU sizes, each at several batch sizes; CUDA events, L2 flushed before each trial, median, contenders
interleaved. Run on a GPU machine: python benchmarks/gpu/compile_backend.py OUT.json"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))
from test_dynamo import MLP, BasicBlock, Encoder  # noqa: E402

import akg_agent  # noqa: E402

MODELS = {
    "mlp_1024": (lambda: MLP(1024), lambda b: torch.randn(b, 1024)),
    "encoder_d512_t256": (lambda: Encoder(512, 8), lambda b: torch.randn(b, 256, 512)),
    "resnet_block_c64_56": (lambda: BasicBlock(64), lambda b: torch.randn(b, 64, 56, 56)),
}
BATCHES = (1, 8, 32)


def timed(fns: dict, x: torch.Tensor, trials: int = 30) -> dict[str, float]:
    flush = torch.empty(256 * 1024 * 1024 // 4, device="cuda")
    times: dict[str, list[float]] = {k: [] for k in fns}
    with torch.no_grad():
        for f in fns.values():
            for _ in range(3):
                f(x)
        for _ in range(trials):
            for name, f in fns.items():  # interleaved
                flush.zero_()
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                a.record()
                f(x)
                b.record()
                torch.cuda.synchronize()
                times[name].append(a.elapsed_time(b) / 1e3)
    return {k: statistics.median(v) for k, v in times.items()}


def main(out: str) -> None:
    rows = []
    for name, (make, inp) in MODELS.items():
        torch.manual_seed(0)
        model = make().eval().cuda()
        akg = akg_agent.compile(model, seeds=(0, 1), cache_dir="/tmp/akg-bench-cache")
        ind = torch.compile(model)
        for b in BATCHES:
            x = inp(b).cuda()
            t0 = time.perf_counter()
            with torch.no_grad():
                err = float((akg(x) - model(x)).abs().max())
                ind(x)
            setup = time.perf_counter() - t0
            t = timed({"eager": model, "inductor": ind, "akg": akg}, x)
            rows.append({"model": name, "batch": b, "median_s": t, "akg_max_abs_err": err,
                         "first_call_s": setup, "akg_vs_eager": t["eager"] / t["akg"],
                         "akg_vs_inductor": t["inductor"] / t["akg"]})
            print(json.dumps(rows[-1]), flush=True)
        rows.append({"model": name, "report": akg.akg_report.summary()})
        print(rows[-1]["report"], flush=True)
    Path(out).write_text(json.dumps({"device": torch.cuda.get_device_name(), "rows": rows}, indent=1))


if __name__ == "__main__":
    main(sys.argv[1])
