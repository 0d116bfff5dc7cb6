"""`akg tune` over a sizing of the real-size set for several DSLs at once, then each program translated
with what the tune chose, ready for one `akg bench --solutions label=DIR,...` run that times every DSL,
eager, torch.compile and max-autotune side by side.

Tunes run `--parallel` at a time, as many as their estimated memory fits: compiling and checking
overlap, timed loops do not (every akg run on the host times under one lock, `verifier.timing.host_lock`).
Only programs with a choice are tuned: with one strategy and one schedule per kernel there is nothing to
measure before the bench. A tune whose report is already in OUT is not run again, so a second call (after
a cut) goes on where the first stopped; `--deadline` stops starting new ones.

    python benchmarks/realsize/tune_set.py --sizing gpu --dsl triton,cuda-c,tilelang,pallas --target h100 \
        --out runs/gpu-set --parallel 6 --deadline 540
    python benchmarks/realsize/tune_set.py ... --translate [--pure]   # OUT/sol/<dsl>[-pure]/<program>.py
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def _programs(sizing: str, names: list[str]) -> list[Path]:
    folder = ROOT / "benchmarks" / "realsize" / sizing
    return [folder / f"{n}.py" for n in names] if names else sorted(folder.glob("*.py"))


def _choices(program: Path, dsl: str, target: str) -> list[str]:
    """The strategies `akg tune` would measure for this program (more than one: worth a tune)."""
    from akg_agent.translate import build
    from akg_agent.tune import strategies_for

    return [s.describe() for s in strategies_for(build(program, dsl, target, tuned=False))]


def _one(program: str, dsl: str, target: str, budget: int, limit: float | None, out: str) -> None:
    """One tune, its report as JSON in `out` (run in a child process: `--one`)."""
    from akg_agent.tune import tune
    from ir.errors import AkgError

    t0 = time.perf_counter()
    try:
        rep = tune(program, target, dsl, budget=budget, time_limit_s=limit, out=Path(out).with_suffix(".py"))
    except AkgError as e:
        rep = {"problem": program, "dsl": dsl, "error": str(e)}
    rep["wall_s"] = time.perf_counter() - t0
    Path(out).write_text(json.dumps(rep, indent=1, default=str))


def _summary(out: Path) -> dict[str, dict[str, object]]:
    rows: dict[str, dict[str, object]] = {}
    for f in sorted((out / "tuned").glob("*/*.json")):
        rep = json.loads(f.read_text())
        rows.setdefault(f.parent.name, {})[f.stem] = {
            "wall_s": round(rep.get("wall_s", 0.0), 1), "chosen": rep.get("strategy"), "error": rep.get("error"),
            "verdict": rep.get("verdict"),
            "strategies": [{k: s.get(k) for k in ("strategy", "time_s", "eager_s", "score_s", "head_to_head_score_s",
                                                  "verdict")}
                           for s in rep.get("strategies", [])]}
    return rows


def _translate(program: Path, dsl: str, target: str, pure: bool, dest: Path) -> str:
    from akg_agent.translate import build, render
    from ir.errors import AkgError

    try:
        t = build(program, dsl, target, pure=pure)
    except AkgError as e:
        return f"{dsl}{'-pure' if pure else ''} {program.stem}: {e}"
    dest.mkdir(parents=True, exist_ok=True)
    (dest / program.name).write_text(render(t))
    return f"{dsl}{'-pure' if pure else ''} {program.stem}: {t.strategy.describe()}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizing", default="gpu")
    ap.add_argument("--dsl", required=True, help="comma-separated")
    ap.add_argument("--target", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--programs", default="", help="comma-separated names (default: the whole sizing)")
    ap.add_argument("--budget", type=int, default=1)
    ap.add_argument("--time", type=float, default=None, help="akg tune --time per program")
    ap.add_argument("--parallel", type=int, default=4)
    ap.add_argument("--deadline", type=float, default=None, help="seconds after which no tune is started")
    ap.add_argument("--translate", action="store_true", help="translate every program instead of tuning")
    ap.add_argument("--pure", action="store_true", help="with --translate: pure modules too")
    ap.add_argument("--one", nargs=2, metavar=("PROGRAM", "DSL"), help=argparse.SUPPRESS)
    ap.add_argument("--one-translate", nargs=2, metavar=("PROGRAM", "DSL"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    out = Path(args.out)
    if args.one:
        _one(args.one[0], args.one[1], args.target, args.budget, args.time,
             str(out / "tuned" / args.one[1] / (Path(args.one[0]).stem + ".json")))
        return 0
    if args.one_translate:
        print(_translate(Path(args.one_translate[0]), args.one_translate[1], args.target, args.pure, out))
        return 0
    programs = _programs(args.sizing, [n for n in args.programs.split(",") if n])
    dsls = args.dsl.split(",")
    start = time.monotonic()
    if args.translate:
        print(f"modules to {out / 'sol'}/<dsl>[-pure]/", flush=True)  # OUT is the tune's folder, not the modules'
        jobs = [(p, d, pure) for d in dsls for pure in ((False, True) if args.pure else (False,)) for p in programs]
        def translate(job: tuple[Path, str, bool]) -> str:  # a child each: builds hold the GIL
            p, d, pure = job
            label = d + ("-pure" if pure else "")
            cmd = [sys.executable, __file__, "--one-translate", str(p), d, "--dsl", d, "--target", args.target,
                   "--out", str(out / "sol" / label)] + (["--pure"] if pure else [])
            r = subprocess.run(cmd, capture_output=True, text=True)
            return r.stdout.strip() or f"{label} {p.stem}: failed: {r.stderr.strip()[-300:]}"

        with ThreadPoolExecutor(args.parallel) as pool:
            for line in pool.map(translate, jobs):
                print(line, flush=True)
        return 0
    todo = [(p, d) for d in dsls for p in programs if not (out / "tuned" / d / f"{p.stem}.json").is_file()]
    from akg_agent.bench.admission import MemoryGate, device_capacity, verification_bytes
    from hardware_models.spec import load_target

    # as many side by side as their estimated memory fits (ten at once ran six out of the H100's memory)
    gate = MemoryGate(device_capacity(load_target(args.target).kind))

    def run(job: tuple[Path, str]) -> None:
        p, d = job
        if args.deadline is not None and time.monotonic() - start > args.deadline:
            return
        if len(_choices(p, d, args.target)) < 2:
            return
        (out / "tuned" / d).mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, __file__, "--one", str(p), d, "--dsl", d, "--target", args.target, "--out", str(out),
               "--budget", str(args.budget)] + (["--time", str(args.time)] if args.time else [])
        t0 = time.monotonic()
        with gate.hold(verification_bytes(p)):
            r = subprocess.run(cmd, capture_output=True, text=True)
        tail = r.stderr.strip().splitlines()[-1:] if r.returncode else []
        print(f"{d} {p.stem}: {time.monotonic() - t0:.0f} s {' '.join(tail)}", flush=True)

    with ThreadPoolExecutor(args.parallel) as pool:
        list(pool.map(run, todo))
    (out / "tune.json").write_text(json.dumps(_summary(out), indent=1))
    print(f"done in {time.monotonic() - start:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
