"""The `akg` command line (also `python -m akg_agent`)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from ir.errors import AkgError

from .commands import bench, hw, translate, tune, verify


def _cmd_ir(args: argparse.Namespace) -> int:
    from ir.lift import lift
    from ir.passes import PASSES, Trace, run_passes
    from ir.passes.fusion import fuse, to_dot
    from ir.passes.rowfuse import fuse_rows
    from ir.problem import load_problem
    from ir.text import print_graph
    from ir.verify import verify_graph

    from .examples import DEFAULT_PROBLEM

    names = [p for p in (args.passes or "").split(",") if p]
    plans = ("fuse", "rows")  # plan passes: fusion, then row fusion (backends with a row template)
    unknown = [p for p in names if p not in PASSES and p not in plans]
    if unknown:
        raise AkgError(f"unknown pass {unknown[0]!r}; choose from {', '.join(sorted(PASSES) + list(plans))}")
    problem = load_problem(args.file or DEFAULT_PROBLEM)
    g = lift(problem, train=args.train, allow_opaque=args.allow_opaque)
    trace = Trace()
    run_passes(g, [p for p in names if p not in plans], trace)
    verify_graph(g)
    plan = fuse(g) if "fuse" in names or "rows" in names else None
    if plan is not None and "rows" in names:
        plan = fuse_rows(g, plan)
    if args.format == "json":
        doc = {"graph": print_graph(g), "outputs": [o.name for o in g.outputs],
               "opaque": g.meta.get("opaque", []), "trace": [f.__dict__ for f in trace.firings]}
        if plan is not None:
            doc["fusion"] = plan.to_json()
        print(json.dumps(doc, indent=2))
        return 0
    if args.format == "dot":
        print(to_dot(g, plan), end="")
        return 0
    print(print_graph(g), end="")
    if plan is not None:
        print("\n// kernel groups")
        print("\n".join("// " + line for line in str(plan).splitlines()))
    if args.trace:
        print("\n// trace")
        print("\n".join("// " + str(f) for f in trace.firings) or "// (no rule fired)")
    for o in g.meta.get("opaque", []):
        print(f"// opaque (left in torch): {o}", file=sys.stderr)
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="akg", description="PyTorch programs to fast, verified kernels.")
    sub = p.add_subparsers(dest="command", required=True)
    ir = sub.add_parser("ir", help="lift a problem to graph IR, run passes, print it")
    ir.add_argument("file", nargs="?", help="KernelBench-format problem (default: the embedded example)")
    ir.add_argument("--passes", default="", help="comma-separated: canonicalize,fold,cse,dce,algebraic,"
                    "simplify,decompose,fuse")
    ir.add_argument("--format", choices=("text", "json", "dot"), default="text")
    ir.add_argument("--trace", action="store_true", help="show which rule changed what")
    ir.add_argument("--allow-opaque", action="store_true", help="keep unsupported ops as torch calls")
    ir.add_argument("--train", action="store_true", help="lift in training mode (default: eval)")
    ir.set_defaults(fn=_cmd_ir)
    hw.add_parser(sub)
    verify.add_parser(sub)
    bench.add_parser(sub)
    translate.add_parser(sub)
    tune.add_parser(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.fn(args))
    except AkgError as e:
        print(f"akg: error: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("akg: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
