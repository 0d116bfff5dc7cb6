"""`akg hw`: list, show, speed-of-light and calibration of hardware models."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rich.console import Console
from rich.table import Table

from dsl_backends import dsls_for
from hardware_models.calibrate import calibrate
from hardware_models.cost import NUMERICS, estimate_program, speed_of_light
from hardware_models.spec import calibrated_path, load_target, target_names
from ir.errors import AkgError
from ir.lift import lift
from ir.passes import run_passes
from ir.problem import load_problem

from ..bench.rank import rank_schedules
from ..gemm_rate import generated_gemm_figures


def _fmt(v: float, unit: str = "") -> str:
    for scale, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(v) >= scale:
            return f"{v / scale:.4g} {prefix}{unit}"
    return f"{v:.4g} {unit}".strip()


def cmd_list(args: argparse.Namespace) -> int:
    t = Table(title="akg hardware models")
    for col in ("name", "description", "units", "tensor bf16", "vector f32", "DRAM", "DSLs", "calibrated"):
        t.add_column(col)
    for name in target_names():
        m = load_target(name)
        bf16 = m.peak("tensor", "bf16")
        t.add_row(name, m.description, f"{m.units} {m.figures['chip'].get('units').note or ''}".strip(),
                  _fmt(bf16, "FLOP/s") if bf16 else "-", _fmt(m.peak("vector", "f32") or 0, "FLOP/s"),
                  _fmt(m.dram_bw, "B/s"), ",".join(dsls_for(m)) or "-",
                  "yes" if calibrated_path(name).is_file() else "no")
    Console(width=160).print(t)
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    m = load_target(args.name)
    if args.json:
        print(json.dumps(m.to_json(), indent=2))
        return 0
    t = Table(title=f"{m.name}: {m.description}" + (f" [{m.calibrated_from}]" if m.calibrated_from else ""))
    for col in ("figure", "value", "note", "source"):
        t.add_column(col)
    for section, figs in m.figures.items():
        for key, f in figs.items():
            t.add_row(f"{section}.{key}", f"{f.value:.6g}", f.note, m.source_of(f))
    c = Console(width=200)
    c.print(t)
    c.print(f"DSLs: {', '.join(dsls_for(m)) or 'none yet'}; reference numerics: {m.numerics}")
    return 0


def cmd_sol(args: argparse.Namespace) -> int:
    if args.numerics not in NUMERICS:
        raise AkgError(f"unknown numerics {args.numerics!r}; choose from {', '.join(NUMERICS)}")
    target = load_target(args.target)
    g = lift(load_problem(args.file))
    written = speed_of_light(g, target, args.numerics)
    est_written, _ = estimate_program(g, target, args.numerics)
    run_passes(g, ["simplify"])
    simplified = speed_of_light(g, target, args.numerics)
    est_simplified, _ = estimate_program(g, target, args.numerics)
    doc = written.to_json() | {
        "target": target.name, "numerics": args.numerics, "reference_numerics": target.numerics,
        "calibrated": target.calibrated_from is not None, "fused_estimate_ms": est_written * 1e3,
        "simplified": simplified.to_json() | {"fused_estimate_ms": est_simplified * 1e3},
    }
    if args.json:
        print(json.dumps(doc, indent=2))
        return 0
    for label, r, est in (("as written", written, est_written), ("simplified", simplified, est_simplified)):
        print(f"{label:>10}: SOL {r.sol_s * 1e3:.4g} ms ({r.bound}-bound), {_fmt(r.flops, 'FLOP')}, "
              f"{_fmt(r.bytes, 'B')}; fused kernels estimate {est * 1e3:.4g} ms")
    print(f"target {target.name} ({target.description}), numerics {args.numerics} {target.numerics}"
          + (f", {target.calibrated_from}" if target.calibrated_from else ""))
    return 0


def cmd_calibrate(args: argparse.Namespace) -> int:
    doc = calibrate(args.target, force=args.force, quick=args.quick, more=generated_gemm_figures)
    print(f"calibrated {args.target} on {doc['device']} -> {doc['path']}")
    for k, v in doc["figures"].items():
        print(f"  {k:<28} {v:.6g}")
    return 0


def cmd_rank(args: argparse.Namespace) -> int:
    doc = rank_schedules(args.file, args.target, args.dsl, args.n, args.trials)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(doc, indent=2, default=str))
    for r in doc["schedules"]:
        m = f"{r['measured_ms']:.4g} ms" if r["measured_ms"] else r["verdict"]
        print(f"  {r['schedule']}: model {r['estimate_ms']:.4g} ms, measured {m}")
    rho = doc["spearman_rho"]
    print(f"Spearman rho over {doc['measured']} schedules of {doc['kernel']}: "
          + (f"{rho:.3f}" if rho is not None else "n/a"))
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    hw = sub.add_parser("hw", help="hardware models, speed-of-light, calibration")
    hsub = hw.add_subparsers(dest="hw_command", required=True)
    p = hsub.add_parser("list", help="the known targets")
    p.set_defaults(fn=cmd_list)
    p = hsub.add_parser("show", help="every figure of a target, with its source")
    p.add_argument("name")
    p.add_argument("--json", action="store_true")
    p.set_defaults(fn=cmd_show)
    p = hsub.add_parser("sol", help="speed-of-light time of a problem on a target")
    p.add_argument("file")
    p.add_argument("--target", required=True)
    p.add_argument("--numerics", default="reference", help="reference (what PyTorch does), strict, tf32")
    p.add_argument("--json", action="store_true")
    p.set_defaults(fn=cmd_sol)
    p = hsub.add_parser("calibrate", help="measure the present device and store a calibrated profile")
    p.add_argument("--target", required=True)
    p.add_argument("--force", action="store_true", help="calibrate even if the device name does not match")
    p.add_argument("--quick", action="store_true", help="smaller sizes and fewer trials")
    p.set_defaults(fn=cmd_calibrate)
    p = hsub.add_parser("rank", help="cost-model ranking of GEMM schedules vs times measured on the device")
    p.add_argument("file")
    p.add_argument("--target", required=True)
    p.add_argument("--dsl", required=True, help="the backend whose tuning space is ranked")
    p.add_argument("-n", type=int, default=16, help="schedules to time")
    p.add_argument("--trials", type=int, default=50)
    p.add_argument("--out", default=None, help="write the JSON here")
    p.set_defaults(fn=cmd_rank)
