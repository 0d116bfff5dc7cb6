"""`akg tune FILE --target T [--dsl D|all] [--budget N] [--time S] [-o OUT]`."""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

from dsl_backends import available
from hardware_models.spec import load_target
from ir.errors import AkgError

from ..cluster import Done
from ..tune import TuneOptions, tune


def cmd_tune(args: argparse.Namespace) -> int:
    from rich.progress import Progress

    target = load_target(args.target)
    dsls = [d for d, m in available().items() if m.supports(target)] if args.dsl == "all" else [args.dsl]
    if not dsls:
        raise AkgError(f"no backend targets {args.target}")
    reports = []
    per_device: Counter[str] = Counter()
    with Progress() as progress:
        task = progress.add_task("tuning", total=None)

        def on_progress(kernel: str, done: int, total: int, best: float | None, last: Done | None) -> None:
            if last is not None and last.device:
                per_device[last.device] += 1
            best_txt = f"{best * 1e3:.4g} ms" if best is not None and best != float("inf") else "-"
            devices = ", ".join(f"{d} {n}" for d, n in sorted(per_device.items()))
            progress.update(task, total=total, completed=done,
                            description=f"{kernel}: best {best_txt}" + (f" [{devices}]" if devices else ""))

        opts = TuneOptions(budget=args.budget, time_limit_s=args.time, ray=args.ray,
                           strategies=not args.no_strategies, jobs=args.jobs, dynamic=args.dynamic,
                           learned=args.learned)
        for dsl in dsls:
            out = args.o if len(dsls) == 1 else None
            out = out or str(Path("runs") / f"{Path(args.file).stem}_{dsl}_tuned.py")
            reports.append(tune(args.file, target, dsl, opts, out=out, on_progress=on_progress) | {"out": out})
    for r in reports:
        print(f"{r['dsl']}: {r['measured']} measured, {r['from_db']} from the tuning database, "
              f"{r['elapsed_s']:.1f} s -> {r['out']}")
        if "learned" in r:
            ln = r["learned"]
            print(f"  learned filter: {ln['not_measured']} schedules not measured; {ln['kernels_by_model']} "
                  f"kernels picked by the model ({ln['rows_at_start']} rows at the start)")
        for st in r["strategies"]:
            ms = f"{st['time_s'] * 1e3:.4g} ms" if st["time_s"] else st["verdict"]
            if st["time_s"] and st.get("eager_s"):  # the choice is by score: the time at the first run's eager pace
                ms += f" (eager {st['eager_s'] * 1e3:.4g} ms in the same run; score {st['score_s'] * 1e3:.4g} ms"
                if st.get("head_to_head_s"):
                    ms += (f"; head to head {st['head_to_head_s'] * 1e3:.4g} ms, score "
                           f"{st['head_to_head_score_s'] * 1e3:.4g} ms")
                ms += ")"
            print(f"  strategy {st['strategy']}: {ms}" + ("  <- written" if st["strategy"] == r["strategy"] else ""))
        h2h = r.get("head_to_head")
        if h2h and h2h.get("eager_s"):
            print(f"  head to head: the {h2h['contenders']} accepted strategies timed in turns in one run (eager "
                  f"{h2h['eager_s'] * 1e3:.4g} ms there); the choice follows that run")
        elif h2h:
            print(f"  head to head: not timed ({h2h['verdict']}); the choice follows the runs of each strategy")
        for k in r["kernels"]:
            best = f"{k['best_s'] * 1e3:.4g} ms" if k["best_s"] not in (None, float("inf")) else "-"
            same = f" (shares {k['same_as']}'s measurements: the same structure)" if "same_as" in k else ""
            print(f"  {k['kernel']} ({k['kind']}): {k['best']} module time {best}{same}")
        for lost in r["lost"]:
            print(f"  lost: {lost['kernel']} {lost['schedule']}: {lost['why']} (a rerun tries it again)")
        if per_device:
            print("  timed on: " + ", ".join(f"{d} ({n})" for d, n in sorted(per_device.items())))
    if args.json:
        print(json.dumps(reports, indent=2, default=str))
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("tune", help="search schedules on the device, with a persistent tuning database")
    p.add_argument("file")
    p.add_argument("--target", required=True)
    p.add_argument("--dsl", default="all", help="a DSL, or all that target the device")
    p.add_argument("--budget", type=int, default=8, help="schedules tried per kernel")
    p.add_argument("--time", type=float, default=None,
                   help="stop starting candidates and strategies after this many seconds (those running finish)")
    p.add_argument("-o", default=None)
    p.add_argument("--json", action="store_true")
    p.add_argument("--dynamic", default=None, metavar="SPEC",
                   help="tune a module of run-time sizes (as akg translate --dynamic); candidates are timed at the "
                   "bound, the largest bucket's schedules are searched")
    p.add_argument("--jobs", type=int, default=1, help="candidates compiled and verified at once (each timed "
                   "alone); on Ray the cluster's CPUs decide")
    p.add_argument("--no-strategies", action="store_true", help="search schedules of the default plan only "
                   "(not row fusion vs split, library vs generated convolutions, op families left to the library)")
    p.add_argument("--learned", action="store_true", help="measure each kernel's default and at most a quarter of "
                   "its other schedules: those a model of the measurements so far (kept in the tuning database) "
                   "predicts fastest")
    p.add_argument("--ray", nargs="?", const="", default=None, metavar="ADDRESS",
                   help="measure on Ray: a local instance started for the run, or a cluster's address "
                        "(auto, ray://host:10001)")
    p.set_defaults(fn=cmd_tune)
