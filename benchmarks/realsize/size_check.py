"""Eager time of every program in a sizing folder, on this machine's CPU or GPU, against its band
(gpu/: 1-15 ms on an H100; cpu/: 5-100 ms on a 2-core x86 machine): median of 5 after a warm-up,
inputs re-made per trial so no cache holds them, CPU allocations under the bench's heap policy (what
`akg bench` times). Prints one line per program and writes JSON."""

from __future__ import annotations

import json
import re
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from akg_agent.verifier.timing import steady_heap  # noqa: E402
from ir.problem import load_problem  # noqa: E402

BANDS = {"gpu": (1.0, 15.0), "cpu": (5.0, 100.0)}


def eager_ms(path: Path, device: str) -> float:
    p = load_problem(path)
    model = p.build_model(0).to(device).eval()
    times = []
    with torch.no_grad():
        for trial in range(6):
            xs = [x.to(device) if isinstance(x, torch.Tensor) else x for x in p.make_inputs(trial)]
            if device == "cuda":
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            model(*xs)
            if device == "cuda":
                torch.cuda.synchronize()
            if trial:  # the first is the warm-up
                times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def main() -> None:
    folder = Path(sys.argv[1])
    out = Path(sys.argv[2]) if len(sys.argv) > 2 else None
    device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cpu":  # the bench's heap policy: without it a large output pays its page faults per call
        steady_heap()
    lo, hi = BANDS[folder.name]
    rows = []
    for f in sorted(folder.glob("*.py")):
        ms = eager_ms(f, device)
        ok = lo <= ms <= hi or re.search(r"_b\d+$", f.stem) is not None  # small-batch variants: no band
        rows.append({"problem": f.stem, "eager_ms": round(ms, 3), "in_band": ok})
        print(f"{f.stem:32s} {ms:9.3f} ms {'' if ok else f'OUTSIDE {lo}-{hi} ms'}", flush=True)
    if out is not None:
        out.write_text(json.dumps({"device": torch.cuda.get_device_name() if device == "cuda" else "cpu",
                                   "torch": torch.__version__, "band_ms": [lo, hi], "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
