"""`akg port MODULE --dsl D --target T [--problem P] [-o OUT]`: a module that launches Triton kernels,
lifted through their TTIR, written in another DSL and verified against the original."""

from __future__ import annotations

import argparse
from pathlib import Path

from dsl_backends import available

from ..agents.llm import make_model
from ..port import port


def cmd_port(args: argparse.Namespace) -> int:
    out = args.o or str(Path("runs") / f"{Path(args.module).stem}_{args.dsl}.py")
    model = make_model(args.llm) if args.llm else None
    p = port(args.module, args.dsl, args.target, out, problem=args.problem, timing=not args.no_time, model=model,
             budget=args.budget)
    print(f"{Path(args.module).name} -> {out} ({args.dsl}, {args.target}); reference {p.reference}")
    if p.rewritten is not None:
        r = p.rewritten
        print(f"  rewritten by {r.by} (akg could not lift the kernels): {r.tokens[0]} tokens in, {r.tokens[1]} out")
        for line in r.attempts:
            print(f"  {line}")
        return 0
    t = p.translation
    assert t is not None
    for k in p.kernels:
        print(f"  lifted {k['kernel']}: grid {'x'.join(map(str, k['grid']))}, writes {', '.join(k['writes'])}")
    print(f"  written: {len(t.program.kernels())} kernel(s), library calls: "
          f"{', '.join(s.op for s in t.program.library_calls()) or 'none'}")
    if t.verdict is not None:
        print(f"  verified against the original: {t.verdict.line()}")
    for n in t.notes:
        print(f"  note: {n}")
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("port", help="port a module's Triton kernels to another DSL or chip, verified against it")
    p.add_argument("module", help="a solution module: a ModelNew whose forward launches Triton kernels")
    p.add_argument("--problem", default=None, help="the problem file whose get_inputs() it runs on (default: the "
                   "module's own get_inputs/get_init_inputs)")
    p.add_argument("--dsl", required=True, help=f"one of: {', '.join(sorted(available()))}")
    p.add_argument("--target", required=True, help="hardware model name (cpu, h200, tpu-v5e, ...)")
    p.add_argument("-o", default=None, help="output module (default runs/<module>_<dsl>.py); the reference "
                   "problem is written beside it as <out>_original.py")
    p.add_argument("--no-time", action="store_true", help="verify but do not time")
    p.add_argument("--llm", default=None, help="anthropic:MODEL, openai:MODEL or replay:TRANSCRIPT: a model writes "
                   "the port where akg cannot lift the kernels (CUDA-C, an op the lifter lacks)")
    p.add_argument("--budget", type=int, default=3, help="the model's attempts (each verified)")
    p.set_defaults(fn=cmd_port)
