"""The `akg` command line (also `python -m akg_agent`)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from ir.errors import AkgError
from ir.graph import print_graph
from ir.jax_lift import is_jax_problem, lift_jax, load_jax_problem
from ir.lift import lift
from ir.passes import pass_names, run_passes
from ir.passes.fusion import to_dot
from ir.problem import load_problem
from ir.verify import verify_graph

from .commands import bench, hw, port, redteam, testgen, translate, tune, ui, verify
from .examples import DEFAULT_PROBLEM


def _cmd_ir(args: argparse.Namespace) -> int:
    path = args.file or DEFAULT_PROBLEM
    if is_jax_problem(path):  # a JAX program: its jaxpr converted to the same graph IR
        g = lift_jax(load_jax_problem(path))
    else:
        g = lift(load_problem(path), train=args.train, allow_opaque=args.allow_opaque)
    trace = run_passes(g, args.passes or "")
    verify_graph(g)
    plan = g.plan
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
    ir.add_argument("--passes", default="", help="a pipeline: comma-separated pass names, options as "
                    f"name{{key=value}}; passes: {', '.join(pass_names())}")
    ir.add_argument("--format", choices=("text", "json", "dot"), default="text")
    ir.add_argument("--trace", action="store_true", help="show which rule changed what")
    ir.add_argument("--allow-opaque", action="store_true", help="keep unsupported ops as torch calls")
    ir.add_argument("--train", action="store_true", help="lift in training mode (default: eval)")
    ir.set_defaults(fn=_cmd_ir)
    hw.add_parser(sub)
    verify.add_parser(sub)
    bench.add_parser(sub)
    translate.add_parser(sub)
    port.add_parser(sub)
    tune.add_parser(sub)
    testgen.add_parser(sub)
    ui.add_parser(sub)
    redteam.add_parser(sub)
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
