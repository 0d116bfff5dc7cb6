"""`akg translate FILE --dsl D --target T [-o OUT]`: the rules engine end to end."""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def cmd_translate(args: argparse.Namespace) -> int:
    from ..examples import DEFAULT_PROBLEM
    from ..translate import translate

    args.file = args.file or str(DEFAULT_PROBLEM)
    out = args.o or str(Path("runs") / f"{Path(args.file).stem}_{args.dsl}.py")
    baselines = tuple(b for b in args.baselines.split(",") if b)
    t = translate(args.file, args.dsl, args.target, out, verify_result=not args.no_verify,
                  timing=not args.no_time, baselines=baselines, train=args.train, allow_opaque=args.allow_opaque)
    s = t.summary()
    if args.json:
        print(json.dumps(s | {"out": out}, indent=2, default=str))
        return 0
    kinds = ", ".join(f"{k['kind']}" for k in s["kernels"]) or "none"
    libs = ", ".join(s["library_calls"]) or "none"
    print(f"{Path(args.file).name} -> {out} ({args.dsl}, {args.target}, executor: {t.executor})")
    print(f"  kernels: {kinds}; library calls: {libs}")
    print(f"  {s['verdict']}")
    for n in t.notes:
        print(f"  note: {n}")
    timing = t.verdict.details.get("timing") if t.verdict else None
    if timing:
        cand = timing["candidate"]["median_s"]
        for name, r in timing.items():
            if name != "candidate" and r.get("median_s"):
                print(f"  speedup vs {name}: {r['median_s'] / cand:.3g}x "
                      f"({cand * 1e3:.4g} ms vs {r['median_s'] * 1e3:.4g} ms)")
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("translate", help="write a verified ModelNew module in a DSL (offline rules engine)")
    p.add_argument("file", nargs="?", help="KernelBench-format problem (default: the embedded example)")
    p.add_argument("--dsl", required=True, help="triton, cpp, ...")
    p.add_argument("--target", required=True, help="hardware model name (h100, cpu, ...)")
    p.add_argument("-o", default=None, help="output module (default runs/<problem>_<dsl>.py)")
    p.add_argument("--baselines", default="eager", help="timed baselines when the device is present")
    p.add_argument("--no-verify", action="store_true", help="write without verifying (marked in the header)")
    p.add_argument("--no-time", action="store_true", help="verify but do not time")
    p.add_argument("--train", action="store_true")
    p.add_argument("--allow-opaque", action="store_true")
    p.add_argument("--json", action="store_true")
    p.set_defaults(fn=cmd_translate)
