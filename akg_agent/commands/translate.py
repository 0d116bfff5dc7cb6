"""`akg translate FILE --dsl D --target T [-o OUT] [--llm rules|anthropic:M|openai:M|replay:PATH]`:
the agent loop (the rules engine alone by default: offline, no key)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from dsl_backends import available
from ir.errors import AkgError
from ir.passes.library import LIBRARY_FAMILIES

from ..agents import RunConfig, run
from ..agents.human import ConsoleHuman, FileHuman
from ..backward import translate_backward
from ..examples import DEFAULT_PROBLEM
from ..plan_options import PlanOptions
from ..strategy import CONV_STRATEGIES
from ..tuning_db import TuningDB


def cmd_translate(args: argparse.Namespace) -> int:
    resume = Path(args.resume) if args.resume else None
    if resume is not None:
        doc = json.loads((resume / "run.json").read_text()) if (resume / "run.json").is_file() else None
        if doc is None:
            raise AkgError(f"cannot resume from {resume}: it holds no run.json")
        args.file, args.dsl, args.target = doc["config"]["problem"], doc["config"]["dsl"], doc["config"]["target"]
    if not args.dsl or not args.target:
        raise AkgError("akg translate needs --dsl and --target (or --resume RUN_DIR)")
    args.file = args.file or str(DEFAULT_PROBLEM)
    out = args.o or str(Path("runs") / f"{Path(args.file).stem}_{args.dsl}.py")
    if args.backward:  # forward and backward graphs through AOTAutograd, each written and verified
        lines = translate_backward(args.file, args.dsl, args.target, out)
        print(f"{Path(args.file).name} -> {out} ({args.dsl}, {args.target}; forward and backward)")
        for line in lines:
            print(f"  {line}")
        return 0
    cfg = RunConfig(args.file, args.dsl, args.target, llm=args.llm, budget=args.budget, goal_frac=args.goal,
                    out=out, run_dir=args.run_dir, baselines=tuple(b for b in args.baselines.split(",") if b),
                    timing=not args.no_time, use_ncu=not args.no_ncu,
                    plan=PlanOptions(train=args.train, allow_opaque=args.allow_opaque, conv=args.conv,
                                     pure=args.pure, dynamic=args.dynamic,
                                     library=tuple(f for f in (args.library or "").split(",") if f)))
    human = FileHuman() if args.await_decisions else ConsoleHuman() if args.interactive else None
    st = run(cfg, human=human, resume=resume, db=TuningDB())
    best = next(a for a in st.attempts if a.n == st.result["attempt"])
    if args.json:
        print(json.dumps({"out": out, "run_dir": str(st.run_dir), "result": st.result,
                          "attempts": [a.line() for a in st.attempts], "usage": st.usage.line()}, indent=2))
        return 0
    print(f"{Path(args.file).name} -> {out} ({args.dsl}, {args.target})")
    assert st.plan is not None
    for line in st.plan.summary().splitlines():
        print(f"  {line}")
    for a in st.attempts:
        print(f"  {a.line()}")
    print(f"  answer: attempt {best.n} by {best.by}; run directory {st.run_dir}")
    if st.usage.calls:
        print(f"  model: {st.usage.line()}")
    if best.time_ms is None and st.plan.notes:
        print(f"  note: {st.plan.notes}")
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("translate", help="write a verified ModelNew module in a DSL (agents; offline by default)")
    p.add_argument("file", nargs="?", help="KernelBench-format problem (default: the embedded example)")
    p.add_argument("--dsl", help=f"one of: {', '.join(sorted(available()))}")
    p.add_argument("--target", help="hardware model name (h100, cpu, ...)")
    p.add_argument("-o", default=None, help="output module (default runs/<problem>_<dsl>.py)")
    p.add_argument("--llm", default="rules", help="rules (default, offline), anthropic:MODEL, openai:MODEL, "
                   "replay:TRANSCRIPT")
    p.add_argument("--budget", type=int, default=None, help="attempts (default 1 with rules, 5 with a model)")
    p.add_argument("--goal", type=float, default=0.5, help="stop once this fraction of speed-of-light is reached")
    p.add_argument("--interactive", action="store_true", help="approve or edit the plan; steer after each attempt")
    p.add_argument("--await-decisions", action="store_true", help="interactive through files in the run "
                   "directory (what `akg ui` starts): the plan waits for plan_decision.json, each attempt for "
                   "step_decision.json")
    p.add_argument("--resume", default=None, help="go on with the run saved in this run directory")
    p.add_argument("--run-dir", default=None, help="where the run's trace and attempts go (default runs/...)")
    p.add_argument("--baselines", default="eager", help="timed baselines when the device is present")
    p.add_argument("--no-time", action="store_true", help="verify but do not time")
    p.add_argument("--no-ncu", action="store_true", help="no Nsight Compute profile in optimise feedback")
    p.add_argument("--conv", default="library", choices=CONV_STRATEGIES,
                   help="convolutions as torch calls with fused epilogues (default), generated (implicit GEMMs; "
                        "depthwise ones as unrolled windows), only the depthwise ones generated, or torch calls "
                        "over channels-last operands (the transpositions fused into the generated kernels around)")
    p.add_argument("--pure", action="store_true", help="every group generated, no library calls (hybrid: the "
                   "default, convolutions and what a backend does not generate stay declared torch calls)")
    p.add_argument("--library", default=None, metavar="FAMILIES",
                   help=f"op families left to torch, their prologues and epilogues generated: comma-separated "
                   f"from {', '.join(LIBRARY_FAMILIES)} (akg tune measures each both ways)")
    p.add_argument("--dynamic", default=None, metavar="SPEC",
                   help="input dimensions that vary at run time: NAME (dimension 0 of every input, e.g. batch), "
                   "input:dim[,input:dim...], or auto; the module takes sizes from 1 to the traced one there")
    p.add_argument("--backward", action="store_true", help="a ModelNew whose forward and backward passes are "
                   "akg kernels (both graphs verified against float64; a folder OUT_akg/ beside OUT)")
    p.add_argument("--train", action="store_true")
    p.add_argument("--allow-opaque", action="store_true")
    p.add_argument("--json", action="store_true")
    p.set_defaults(fn=cmd_translate)
