"""The cost of generality on the GPU: one `--dynamic batch` module (sizes 1 to the traced batch at run
time) against a static module written for each size, and eager, at four batch sizes per program.
Each module is checked against eager at every size first; then contenders are timed interleaved
(CUDA events, L2 flushed before each trial, median of TRIALS), in one process.
python benchmarks/gpu/dynamic_vs_static.py OUT.json [--dsl triton] [PROGRAM.py ...]"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

from akg_agent.translate import build, render
from ir.problem import load_problem

HERE = Path(__file__).resolve().parents[1] / "realsize" / "gpu"
PROGRAMS = ["mlp", "gemm_gelu_scale_tanh", "layernorm", "softmax_wide"]
FRACTIONS = (1, 2, 4, 8)  # the traced batch, a half, a quarter, an eighth
TRIALS = 30


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def _at_batch(src: Path, n: int, d: Path) -> Path:
    """The program with get_inputs() cut to batch n (a static module is written for that file)."""
    f = d / f"{src.stem}_b{n}.py"
    f.write_text(f"import importlib.util as _u\nimport torch\n_s = _u.spec_from_file_location('_orig_{src.stem}', "
                 f"{str(src)!r})\n_o = _u.module_from_spec(_s)\n_s.loader.exec_module(_o)\nModel = _o.Model\n"
                 "get_init_inputs = _o.get_init_inputs\n\n\ndef get_inputs():\n"
                 f"    return [x[:{n}].contiguous() if isinstance(x, torch.Tensor) else x for x in _o.get_inputs()]\n")
    return f


def _time(fns: dict[str, object], args: list, flush: torch.Tensor) -> dict[str, float]:
    times: dict[str, list[float]] = {k: [] for k in fns}
    with torch.no_grad():
        for f in fns.values():  # warm-up (and compile)
            for _ in range(3):
                f(*args)
        for _ in range(TRIALS):
            for k, f in fns.items():  # interleaved
                flush.zero_()
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                a.record()
                f(*args)
                b.record()
                torch.cuda.synchronize()
                times[k].append(a.elapsed_time(b))
    return {k: statistics.median(v) for k, v in times.items()}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--dsl", default="triton")
    ap.add_argument("programs", nargs="*")
    args = ap.parse_args()
    paths = [Path(p) for p in args.programs] or [HERE / f"{p}.py" for p in PROGRAMS]
    flush = torch.empty(256 << 18, device="cuda")  # 256 MB
    rows = []
    with tempfile.TemporaryDirectory() as td:
        d = Path(td)
        for path in paths:
            p = load_problem(path)
            traced = p.make_inputs(0)[0].shape[0]
            t0 = time.time()
            dyn = build(path, args.dsl, "h100", dynamic="batch")
            (d / f"{path.stem}_dyn.py").write_text(render(dyn))
            dmod = _load(d / f"{path.stem}_dyn.py", f"dyn_{path.stem}")
            ref = p.build_model(0).cuda().eval()
            dm = dmod.ModelNew().cuda()
            dm.load_state_dict(ref.state_dict(), strict=False)
            build_s = time.time() - t0
            for frac in FRACTIONS:
                n = max(1, traced // frac)
                sp = _at_batch(path, n, d)
                st = build(sp, args.dsl, "h100")
                (d / f"{path.stem}_s{n}.py").write_text(render(st))
                smod = _load(d / f"{path.stem}_s{n}.py", f"st_{path.stem}_{n}")
                sm = smod.ModelNew().cuda()
                sm.load_state_dict(ref.state_dict(), strict=False)
                x = [t.cuda() if isinstance(t, torch.Tensor) else t for t in load_problem(sp).make_inputs(0)]
                with torch.no_grad():
                    want = ref(*x).double()
                    errs = {k: float((m(*x).double() - want).abs().max()) for k, m in (("dynamic", dm), ("static", sm))}
                ms = _time({"eager": ref, "static": sm, "dynamic": dm}, x, flush)
                row = {"program": path.stem, "batch": n, "traced": traced, **{f"{k}_ms": v for k, v in ms.items()},
                       "dynamic_over_static": ms["dynamic"] / ms["static"], "max_abs_err_vs_eager": errs}
                rows.append(row)
                print(json.dumps(row), flush=True)
                Path(args.out).write_text(json.dumps({"device": torch.cuda.get_device_name(), "dsl": args.dsl,
                                                      "trials": TRIALS, "rows": rows}, indent=1))
            print(f"{path.stem}: dynamic module built in {build_s:.1f} s", flush=True)


if __name__ == "__main__":
    main()
