"""`akg verify REF CAND`: exit 0 if the candidate is accepted, else exit 1 and one line with the reason."""

from __future__ import annotations

import argparse
import json

from akg_agent.verifier import verify
from akg_agent.verifier.sandbox import Limits


def cmd_verify(args: argparse.Namespace) -> int:
    tolerances = {}
    if args.atol is not None or args.rtol is not None:
        for dt, (a, r) in {"float32": (1e-4, 1e-4), "float16": (1e-2, 1e-2), "bfloat16": (1e-2, 1e-2)}.items():
            tolerances[dt] = (args.atol if args.atol is not None else a, args.rtol if args.rtol is not None else r)
    baselines = tuple(b for b in (args.baselines or "").split(",") if b)
    v = verify(args.ref, args.cand, target=args.target, seeds=tuple(range(args.seeds)),
               timing=args.time or bool(baselines), baselines=baselines,
               trials=args.trials, limits=Limits(timeout_s=args.timeout), tolerances=tolerances,
               train=args.train, backward=args.backward)
    if args.json:
        print(json.dumps(v.to_json(), indent=2, default=str))
    else:
        print(v.line())
        t = v.details.get("timing")
        if t:
            for name, r in t.items():
                if "median_s" in r:
                    print(f"  {name:<22} {r['median_s'] * 1e3:9.4f} ms (median of {r['trials']})")
    return 0 if v.accepted else 1


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("verify", help="check a ModelNew module against a reference problem, in a sandbox")
    p.add_argument("ref", help="KernelBench-format problem (Model, get_inputs, get_init_inputs)")
    p.add_argument("cand", help="candidate module defining ModelNew")
    p.add_argument("--target", default="cpu", help="hardware model name (cpu, h100, ...)")
    p.add_argument("--seeds", type=int, default=5, help="input seeds to compare (at least 5 recommended)")
    p.add_argument("--timeout", type=float, default=300.0, help="seconds before the candidate counts as hung")
    p.add_argument("--time", action="store_true", help="also time the candidate")
    p.add_argument("--baselines", default="", help="comma-separated: eager,compile,compile-max-autotune")
    p.add_argument("--trials", type=int, default=None, help="timed trials (default 100 on GPU, 10 on CPU)")
    p.add_argument("--atol", type=float, default=None)
    p.add_argument("--rtol", type=float, default=None)
    p.add_argument("--train", action="store_true", help="compare in training mode (default: eval)")
    p.add_argument("--backward", action="store_true", help="check (and with --time, time) a training step: "
                   "every gradient of the floating inputs and the parameters against float64's, like an output")
    p.add_argument("--json", action="store_true")
    p.set_defaults(fn=cmd_verify)
