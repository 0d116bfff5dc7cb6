"""Runs the benchmark: each problem's solution verified and timed with the baselines, in one
sandboxed run per problem (the same timing code for all of them)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ir.errors import AkgError

from .metrics import summarize
from .report import render


def collect(paths: Sequence[str]) -> list[Path]:
    out: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            out += sorted(q for q in p.glob("*.py") if not q.name.startswith("_"))
        elif p.is_file():
            out.append(p)
        else:
            raise AkgError(f"no such problem file or folder: {p}")
    if not out:
        raise AkgError("no problem files found under the given paths")
    return out


def bench_one(problem: Path, solution: Path | None, target: str, baselines: Sequence[str], trials: int | None,
              timeout_s: float) -> dict[str, Any]:
    from akg_agent.verifier import verify
    from akg_agent.verifier.sandbox import Limits
    from hardware_models.cost import speed_of_light
    from hardware_models.spec import load_target
    from ir.lift import lift
    from ir.problem import load_problem

    rec: dict[str, Any] = {"problem": problem.stem, "path": str(problem), "correct": False, "speedup": {}}
    if solution is None or not solution.is_file():
        rec["reason"] = "no solution"
        return rec
    rec["solution"] = str(solution)
    t0 = time.perf_counter()
    try:
        v = verify(problem, solution, target=target, timing=True, baselines=tuple(baselines), trials=trials,
                   limits=Limits(timeout_s=timeout_s))
    except AkgError as e:
        rec["reason"] = str(e)
        return rec
    rec.update(correct=v.accepted, code=v.code, reason=v.reason, verify_s=time.perf_counter() - t0,
               device=v.details.get("device"), on_target=v.details.get("on_target"))
    t = v.details.get("timing") or {}
    cand = t.get("candidate", {}).get("median_s")
    if cand:
        rec["candidate_ms"] = cand * 1e3
        for b in baselines:
            base = t.get(b, {})
            if base.get("median_s"):
                rec.setdefault("baseline_ms", {})[b] = base["median_s"] * 1e3
                rec["speedup"][b] = base["median_s"] / cand
            if base.get("compile_s") is not None:
                rec.setdefault("compile_s", {})[b] = base["compile_s"]
            if base.get("error"):
                rec.setdefault("baseline_errors", {})[b] = base["error"]
        if v.details.get("on_target"):
            try:
                sol = speed_of_light(lift(load_problem(problem)), load_target(target)).sol_s
                rec["sol_ms"], rec["sol_fraction"] = sol * 1e3, sol / cand
            except AkgError as e:
                rec["sol_error"] = str(e)
    return rec


def _translate_all(problems: list[Path], dsl: str, target: str, sol_dir: Path) -> None:
    """Translate each problem with the rules engine; a failure leaves that problem without a
    solution (reported as such), never stops the run."""
    from akg_agent.translate import translate

    sol_dir.mkdir(parents=True, exist_ok=True)
    for p in problems:
        try:
            translate(p, dsl, target, sol_dir / p.name, timing=False, seeds=(0, 1))
        except AkgError as e:
            (sol_dir / f"{p.stem}.error.txt").write_text(str(e))


def run_bench(paths: Sequence[str], target: str, baselines: Sequence[str], solutions: str | None, out_dir: str,
              trials: int | None = None, timeout_s: float = 600.0, dsl: str | None = None,
              on_record: Callable[[dict[str, Any], int, int], None] | None = None) -> dict[str, Any]:
    problems = collect(paths)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if solutions is None:
        if dsl is None:
            raise AkgError("nothing to benchmark: pass --solutions DIR, or --dsl D to translate each problem")
        sol_dir = out / "solutions"
        _translate_all(problems, dsl, target, sol_dir)
    else:
        sol_dir = Path(solutions)
    if not sol_dir.is_dir():
        raise AkgError(f"no such solutions folder: {sol_dir}")
    records = []
    for i, p in enumerate(problems):
        rec = bench_one(p, sol_dir / p.name, target, baselines, trials, timeout_s)
        records.append(rec)
        # write as we go: a killed run keeps every finished problem
        (out / "results.partial.json").write_text(json.dumps(records, indent=2, default=str))
        if on_record is not None:
            on_record(rec, i + 1, len(problems))
    meta = {"target": target, "dsl": dsl or "any", "baselines": list(baselines), "solutions": str(sol_dir),
            "date": time.strftime("%Y-%m-%d %H:%M:%S")}
    summary = summarize(records, baselines)
    doc = {"meta": meta, "summary": summary, "records": records}
    (out / "results.json").write_text(json.dumps(doc, indent=2, default=str))
    (out / "results.partial.json").unlink(missing_ok=True)
    (out / "report.html").write_text(render(records, summary, meta))
    return doc
