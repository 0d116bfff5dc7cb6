"""`akg tune --learned` against a full tune: both from a fresh tuning database and compile cache, over the same
programs in the same order (the learned filter's rows build up as it goes), then each program's two tuned
modules and eager timed in turns in one run. Reports each tune's time and each module's speedup over eager;
the goal (issue 61): the learned tune within 5% of the full tune's result in at most a quarter of its time.

    python benchmarks/realsize/learned_vs_full.py --sizing cpu --target cpu --dsl cpp --out runs/learned
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

PROGRAMS = ["layernorm", "softmax_wide", "rmsnorm", "log_softmax_wide", "sum_last", "groupnorm", "cumsum_rows",
            "argmax_last", "adaptive_avgpool", "gemm_sigmoid_sum"]


def _path(args: argparse.Namespace, name: str) -> Path:
    """A program of the real-size set at `--sizing`, or of `--folder`."""
    return (args.folder or ROOT / "benchmarks" / "realsize" / args.sizing) / f"{name}.py"


def _phase(args: argparse.Namespace, learned: bool) -> None:
    """One tune of every program (in a child process: its own cache and database)."""
    from akg_agent.tune import tune
    from akg_agent.tuning_db import TuningDB
    from ir.errors import AkgError

    label = "learned" if learned else "full"
    db = TuningDB(args.out / label / "tuning.sqlite")
    rows = {}
    for name in args.programs.split(","):
        t0 = time.perf_counter()
        try:
            rep = tune(str(_path(args, name)), args.target, args.dsl,
                       budget=args.budget, db=db, learned=learned, out=args.out / label / f"{name}.py")
            rows[name] = {"tune_s": time.perf_counter() - t0, "measured": rep["measured"],
                          "strategy": rep["strategy"], "learned": rep.get("learned")}
        except AkgError as e:
            rows[name] = {"tune_s": time.perf_counter() - t0, "error": str(e)}
        print(label, name, json.dumps(rows[name]), flush=True)
    (args.out / f"{label}.json").write_text(json.dumps(rows, indent=1))


def _load(path: Path, name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _time(args: argparse.Namespace) -> dict[str, Any]:
    import torch

    from akg_agent.verifier.timing import time_interleaved
    from ir.problem import load_problem

    full, learned = (json.loads((args.out / f"{x}.json").read_text()) for x in ("full", "learned"))
    out: dict[str, Any] = {}
    for name in args.programs.split(","):
        row = {"full_tune_s": full[name]["tune_s"], "learned_tune_s": learned[name]["tune_s"],
               "full_measured": full[name].get("measured"), "learned_measured": learned[name].get("measured")}
        out[name] = row
        if "error" in full[name] or "error" in learned[name]:
            row["error"] = full[name].get("error") or learned[name].get("error")
            continue
        problem = load_problem(_path(args, name))
        ref = problem.build_model(0)
        fns: dict[str, Any] = {"eager": ref}
        for label in ("full", "learned"):
            mod = _load(args.out / label / f"{name}.py", f"akg_{label}_{name}").ModelNew(*problem.get_init_inputs())
            mod.load_state_dict(ref.state_dict())
            fns[label] = mod
        with torch.no_grad():
            got = time_interleaved(fns, [problem.make_inputs(0)], torch.device("cpu"), trials=args.trials)
        med = {k: v.median_s for k, v in got.items() if not isinstance(v, Exception)}
        row.update({f"{k}_s": v for k, v in med.items()})
        if len(med) == 3:
            row["full_x_eager"], row["learned_x_eager"] = med["eager"] / med["full"], med["eager"] / med["learned"]
        print(name, json.dumps(row), flush=True)
    both = [r for r in out.values() if "learned_x_eager" in r]
    geo = (lambda xs: math.exp(sum(map(math.log, xs)) / len(xs)) if xs else None)  # noqa: E731
    summary = {"programs": len(out), "timed": len(both),
               "full_tune_s": sum(r["full_tune_s"] for r in out.values()),
               "learned_tune_s": sum(r["learned_tune_s"] for r in out.values()),
               "full_x_eager": geo([r["full_x_eager"] for r in both]),
               "learned_x_eager": geo([r["learned_x_eager"] for r in both])}
    summary["time_share"] = summary["learned_tune_s"] / summary["full_tune_s"]
    if summary["full_x_eager"] and summary["learned_x_eager"]:
        summary["learned_vs_full"] = summary["learned_x_eager"] / summary["full_x_eager"]
    return {"summary": summary, "programs": out}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizing", default="cpu")
    p.add_argument("--target", default="cpu")
    p.add_argument("--dsl", default="cpp")
    p.add_argument("--programs", default=",".join(PROGRAMS))
    p.add_argument("--folder", type=Path, default=None, help="the programs' folder (default: the real-size set's)")
    p.add_argument("--budget", type=int, default=8)
    p.add_argument("--trials", type=int, default=20)
    p.add_argument("--phase", choices=["full", "learned"], default=None, help=argparse.SUPPRESS)
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    if args.phase:
        _phase(args, args.phase == "learned")
        return 0
    for label in ("full", "learned"):  # each from an empty compile cache and database
        if not (args.out / f"{label}.json").exists():
            env = dict(os.environ, AKG_CACHE_DIR=str(args.out / label / "cache"))
            subprocess.run([sys.executable, __file__, *(argv if argv is not None else sys.argv[1:]),
                            "--phase", label], env=env, check=True)
    from akg_agent.bench.provenance import provenance

    doc = _time(args)
    doc["meta"] = {"set": "learned-vs-full", "sizing": args.sizing, "folder": str(args.folder or ""),
                   "target": args.target, "dsl": args.dsl,
                   "budget": args.budget, **provenance(["benchmarks/realsize/learned_vs_full.py",
                                                        *(argv if argv is not None else sys.argv[1:])])}
    (args.out / "results.json").write_text(json.dumps(doc, indent=1, default=str))
    print(json.dumps(doc["summary"], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
