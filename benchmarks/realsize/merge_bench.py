"""Several `akg bench` runs of one set (one per GPU of a host, a later call for what a cut run left, each
with the same --solutions labels) merged into one results.json and report.html. A problem found in more
than one run keeps its first run's row: pass the runs in order of preference.

    python benchmarks/realsize/merge_bench.py OUT RUN [RUN ...] --note "..." [--command "..."] [--sol-now]
    (RUN: a bench's --out folder; its results.json, or results.partial.json where the run was cut)

--sol-now recomputes every row's speed-of-light with the target's model as it is now (after an `akg hw
calibrate` that the run did not have: its fractions rested on estimates); the timings stay as measured.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def _rows(run: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """A run's records and meta (a cut run has records only)."""
    whole = run / "results.json"
    if whole.is_file():
        doc = json.loads(whole.read_text())
        return doc["records"], doc["meta"]
    partial = run / "results.partial.json"
    if not partial.is_file():
        raise SystemExit(f"{run}: neither results.json nor results.partial.json")
    return json.loads(partial.read_text()), {}


def merge(runs: list[list[dict[str, Any]]], names: list[Path], baselines: list[str],
          labels: list[str]) -> dict[str, Any]:
    from akg_agent.bench.metrics import summarize
    from akg_agent.bench.runner import flatten

    records: list[dict[str, Any]] = []
    seen: set[str] = set()
    for rows, run in zip(runs, names):
        for r in rows:
            if r["problem"] not in seen:
                seen.add(r["problem"])
                records.append(dict(r, run=str(run)))
    records.sort(key=lambda r: r["problem"])
    doc: dict[str, Any] = {"records": records}
    if len(labels) > 1:
        doc["by_label"] = {lb: {"summary": summarize(rs, baselines), "records": rs}
                           for lb, rs in flatten(records, labels).items()}
        doc["summary"] = doc["by_label"][labels[0]]["summary"]
    else:
        doc["summary"] = summarize(records, baselines)
    return doc


def resol(records: list[dict[str, Any]], target: str) -> None:
    """Each record's speed-of-light, and its fraction and its peers', from the target's present model."""
    from akg_agent.verifier import sol_bound
    from ir.problem import load_problem

    for r in records:
        timed = [x for x in (r, *r.get("peers", {}).values()) if x.get("correct") and x.get("candidate_ms")]
        if not timed or not r.get("path"):
            continue
        r["sol_ms"] = sol_bound(load_problem(ROOT / r["path"]), target) * 1e3
        for x in timed:
            x["sol_fraction"] = r["sol_ms"] / x["candidate_ms"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", help="file name without suffix: OUT.json and OUT.html")
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("--note", default="")
    ap.add_argument("--command", default="")
    ap.add_argument("--sol-now", action="store_true", help="speed-of-light from the target's model as it is now")
    args = ap.parse_args()
    from akg_agent.bench.report import render
    from akg_agent.bench.runner import parse_solutions, sol_basis

    read = [_rows(r) for r in args.runs]  # each run's file read once
    metas = [m for _, m in read if m]
    if not metas:
        raise SystemExit("no run finished: the labels and baselines come from a finished run's results.json")
    meta = dict(metas[0], runs=[str(r) for r in args.runs], note=args.note, command=args.command)
    labels = list(parse_solutions(meta["solutions"])) if meta.get("solutions") else [""]
    if args.sol_now:
        for rows, _ in read:
            resol(rows, meta["target"])
        meta["sol_model"] = f"{sol_basis(meta['target'])} (recomputed after the run: --sol-now)"
    doc = merge([rows for rows, _ in read], args.runs, meta["baselines"], labels)
    doc = {"meta": meta, **doc}
    Path(args.out + ".json").write_text(json.dumps(doc, indent=2, default=str))
    Path(args.out + ".html").write_text(render(doc["records"], doc["summary"], meta))
    for lb, g in doc.get("by_label", {"": {"summary": doc["summary"]}}).items():
        s = g["summary"]
        print(f"{lb or 'solutions'}: correct {s['correct']}/{s['problems']}; " + "; ".join(
            f"{b} {s[f'geomean_speedup_vs_{b}'] or 0:.3g}x" for b in meta["baselines"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
