"""`akg bench PATH... --solutions DIR`: verified timings side by side, a live table, JSON and HTML."""

from __future__ import annotations

import argparse
from collections import Counter
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.table import Table

from ir.errors import AkgError

from ..bench.runner import BenchOptions, run_bench

# max-autotune captures CUDA graphs, which copy each fresh input into the graph's own buffer: the
# no-cudagraphs variant times the generated kernels alone
BASELINES = ("eager", "compile", "compile-max-autotune", "compile-max-autotune-no-cudagraphs")


def _table(rows: list[dict[str, Any]], baselines: list[str], done: int, total: int) -> Table:
    t = Table(title=f"akg bench: {done}/{total} problems")
    for col in ["problem", "correct", "candidate ms"] + [f"vs {b}" for b in baselines] + ["of SOL", "reason"]:
        t.add_column(col)
    for r in rows:
        t.add_row(r["problem"], "yes" if r.get("correct") else "no",
                  f"{r['candidate_ms']:.4g}" if r.get("candidate_ms") else "-",
                  *[f"{r['speedup'][b]:.3g}x" if b in r.get("speedup", {}) else "-" for b in baselines],
                  f"{r['sol_fraction']:.1%}" if r.get("sol_fraction") else "-",
                  (r.get("reason") or "")[:60])
    return t


def _side_by_side(doc: dict[str, Any], baselines: list[str]) -> Table:
    """Problem x solution label: correct, ms, speedup over each baseline (all from one run per problem)."""
    t = Table(title="side by side (baselines shared per problem)")
    t.add_column("problem")
    t.add_column("baseline ms")
    labels = list(doc["by_label"])
    for lb in labels:
        t.add_column(lb)
    for i, rec in enumerate(doc["records"]):
        base = ", ".join(f"{b} {rec['baseline_ms'][b]:.3g}" for b in baselines if b in rec.get("baseline_ms", {}))
        cells = []
        for lb in labels:
            r = doc["by_label"][lb]["records"][i]
            if not r.get("correct") or not r.get("candidate_ms"):
                cells.append("no: " + (r.get("reason") or "not correct")[:30])
                continue
            sp = " / ".join(f"{r['speedup'][b]:.2f}x" for b in baselines if b in r.get("speedup", {}))
            cells.append(f"{r['candidate_ms']:.3g} ms ({sp})")
        t.add_row(rec["problem"], base or "-", *cells)
    return t


def cmd_bench(args: argparse.Namespace) -> int:
    baselines = [b for b in args.baselines.split(",") if b]
    unknown = [b for b in baselines if b not in BASELINES]
    if unknown:
        raise AkgError(f"unknown baseline {unknown[0]!r}; choose from {', '.join(BASELINES)}")
    console = Console()
    rows: list[dict[str, Any]] = []
    with Live(_table(rows, baselines, 0, 0), console=console, refresh_per_second=4) as live:
        def on_record(rec: dict[str, Any], done: int, total: int) -> None:
            rows.append(rec)
            live.update(_table(rows, baselines, done, total))

        opts = BenchOptions(trials=args.trials, timeout_s=args.timeout, dsl=args.dsl, jobs=args.jobs,
                            memory_bytes=int(args.memory_gb * 2**30) if args.memory_gb else None, pure=args.pure,
                            ray=args.ray, backward=args.backward)
        doc = run_bench(args.paths, args.target, baselines, args.solutions, args.out, opts, on_record)
    groups = {lb: g["summary"] for lb, g in doc.get("by_label", {}).items()} or {"": doc["summary"]}
    if "by_label" in doc:
        console.print(_side_by_side(doc, baselines))
    for label, s in groups.items():
        console.print((f"{label}: " if label else "") + f"correct {s['correct']}/{s['problems']}; " + "; ".join(
            f"vs {b}: geomean {s[f'geomean_speedup_vs_{b}'] or 0:.3g}x, fast_1 {s[f'fast_p_vs_{b}']['1.0']:.0%}"
            for b in baselines))
        for b in baselines:  # the upper quartile of the paired speedups below 1.0, beyond the A/A control's
            if s.get(f"slower_beyond_noise_vs_{b}"):
                console.print(f"slower than {b} in 3 of 4 turns, beyond eager-vs-eager's spread: "
                              f"{', '.join(s[f'slower_beyond_noise_vs_{b}'])}")
        if s.get("guard_us_median") is not None:
            console.print(f"input guard: {s['guard_us_median']:.2f} us per call (median; max {s['guard_us_max']:.2f})")
    console.print(f"speed-of-light from: {doc['meta']['sol_model']}")
    timed_on = Counter(r["timed_on"] for r in doc["records"] if r.get("timed_on"))
    if timed_on:
        console.print("timed on: " + ", ".join(f"{d} ({n})" for d, n in sorted(timed_on.items())))
    cards = Counter(r["timed_card"] for r in doc["records"] if r.get("timed_card"))
    if cards:
        console.print(f"timed on another card than --target {args.target}: "
                      + ", ".join(f"{c} ({n})" for c, n in sorted(cards.items())))
    console.print(f"results: {args.out}/results.json, report: {args.out}/report.html")
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bench", help="verify and time solutions against eager and torch.compile")
    p.add_argument("paths", nargs="+", help="problem files or folders")
    p.add_argument("--dsl", default=None, help="which DSL the solutions are in (for the report)")
    p.add_argument("--target", default="cpu")
    p.add_argument("--baselines", default="eager,compile", help=f"comma-separated: {','.join(BASELINES)}")
    p.add_argument("--solutions", default=None, help="folder of ModelNew modules named like the problems, or "
                   "label=DIR,label=DIR,... to time several (one per DSL, say) side by side in one run per problem")
    p.add_argument("--out", default="runs/bench", help="folder for results.json and report.html")
    p.add_argument("--pure", action="store_true", help="with --dsl: time a pure translation (every group "
                   "generated) beside the hybrid one")
    p.add_argument("--backward", action="store_true", help="time a training step, forward and backward (every "
                   "gradient checked against float64's first); with --dsl each problem is translated with --backward")
    p.add_argument("--trials", type=int, default=None)
    p.add_argument("--timeout", type=float, default=600.0)
    p.add_argument("--ray", nargs="?", const="", default=None, metavar="ADDRESS",
                   help="translate and verify on Ray, time in one actor per device: a local instance, or a "
                        "cluster's address (auto, ray://host:10001)")
    p.add_argument("--jobs", type=int, default=1, help="problems verified at once; a run times only while no "
                   "other uses the GPU (a lock file), so timings stay clean, and only while their estimated "
                   "memory fits the device")
    p.add_argument("--memory-gb", type=float, default=None,
                   help="memory --jobs may fill (default: the device's free memory)")
    p.set_defaults(fn=cmd_bench)
