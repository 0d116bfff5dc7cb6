"""`akg testgen PROBLEM MODULE -o test_NAME.py`: a standalone pytest file for a written module."""

from __future__ import annotations

import argparse

from akg_agent.testgen import generate


def cmd_testgen(args: argparse.Namespace) -> int:
    out = args.out or f"test_{args.module.rsplit('/', 1)[-1].removesuffix('.py')}.py"
    path = generate(args.problem, args.module, out, seeds=tuple(range(args.seeds)))
    print(f"wrote {path}: pytest {path}  (AKG_BENCHMARK=1 to time it)")
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("testgen", help="write a standalone pytest file for a written module")
    p.add_argument("problem", help="the KernelBench-format problem the module was written for")
    p.add_argument("module", help="the written module (ModelNew)")
    p.add_argument("-o", "--out", help="the test file (default: test_MODULE.py)")
    p.add_argument("--seeds", type=int, default=5, help="input seeds to compare")
    p.set_defaults(fn=cmd_testgen)
