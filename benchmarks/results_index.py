"""The results archive: `benchmarks/results/INDEX.md` written from each result's `meta` (and its name where an
older file has no meta of the kind), and with `--reorganize`, the files sorted into

- `latest/`: the newest whole run of each benchmark set per (machine, set, DSL, precision);
- `archive/`: everything else (earlier runs, partial runs, one-experiment files), by name;

with partial files dropped where the finished run of the same name exists, and machine paths scrubbed from
every meta. Files that belong together (a run's .json, .html, -tune.txt) share a stem and move together.

    python benchmarks/results_index.py               # INDEX.md again from what is there
    python benchmarks/results_index.py --reorganize  # sort new results into latest/ and archive/ first
    python benchmarks/results_index.py --check       # exit 1 where INDEX.md is out of date (a test runs this)
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
RESULTS = HERE / "results"
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from akg_agent.bench.provenance import scrub  # noqa: E402

SUFFIXES = (".partial.json", "-tune.txt", ".json", ".html", ".txt", ".log", ".csv", ".md")
MACHINES = ("h100x4", "h100x2", "h100", "h200x2", "h200", "cpu")
DSLS = {"cpp": "cpp", "triton": "triton", "cuda-c": "cuda-c", "cudac": "cuda-c", "tilelang": "tilelang",
        "pallas": "pallas", "metal": "metal", "4dsl": "four GPU DSLs", "3dsl": "three GPU DSLs"}
# the sets a run can cover whole, and how many programs a run needs to count as the whole set
# the longer name first; KernelBench's levels are sets apart (a level-2 run does not supersede level 1's)
SETS = {"realsize": 40, "kernelbench-l1": 20, "kernelbench-l2": 20, "kernelbench-l3": 10, "kernelbench": 20,
        "models-train": 4, "models": 5, "port-matrix": 20}


@dataclass
class Group:
    """A result: the files of one stem."""

    stem: str
    files: list[Path] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)
    records: int | None = None
    summary: dict[str, Any] | None = None

    @property
    def date(self) -> str:
        m = re.search(r"\d{4}-\d{2}-\d{2}", self.stem)
        return str(self.meta.get("date") or (m.group(0) if m else ""))[:10]

    @property
    def when(self) -> str:
        """The run's date and time where its meta has them (two runs of one day are told apart), else its date."""
        return str(self.meta.get("date") or self.date)

    @property
    def partial(self) -> bool:
        return all(f.name.endswith(".partial.json") for f in self.files)

    def machine(self) -> str:
        gpus = (self.meta.get("machine") or {}).get("gpus") if isinstance(self.meta.get("machine"), dict) else None
        if gpus:
            return f"{gpus[0]} x{len(gpus)}" if len(gpus) > 1 else gpus[0]
        tokens = self.stem.split("-")
        for m in MACHINES:
            if m in tokens:
                return m
        if "gpu" in tokens:  # the real-size GPU runs of before 2026-11-29 ran on the lent H100
            return "h100" if self.date < "2026-11-29" else "gpu"
        return "cpu" if "cpu" in tokens else "unknown"

    def dsl(self) -> str:
        d = self.meta.get("dsl")
        if d and d != "any":
            return str(d)
        tokens = set(re.split(r"[-_]", self.stem))
        found = [v for k, v in DSLS.items() if k in tokens]
        return found[0] if len(found) == 1 else ("several" if found else "-")

    def precision(self) -> str:
        tokens = set(re.split(r"[-_]", self.stem))
        return next((p for p in ("bf16", "fp16") if p in tokens), "fp32")

    def benchmark_set(self) -> str | None:
        """The benchmark set this run covers whole, or None (an experiment, or part of a set)."""
        for name, whole in SETS.items():
            if name in self.stem and self.records is not None and self.records >= whole:
                return name
        return None

    def key(self) -> tuple[str, str, str, str] | None:
        s = self.benchmark_set()
        return None if s is None or self.partial else (self.machine(), s, self.dsl(), self.precision())


def stem_of(path: Path) -> str:
    name = path.name
    for suf in SUFFIXES:
        if name.endswith(suf):
            return name[: -len(suf)]
    return path.stem


def collect(root: Path = RESULTS) -> dict[str, Group]:
    groups: dict[str, Group] = {}  # by folder and stem: an archived run and a new one may share a name
    for f in sorted(p for p in root.rglob("*") if p.is_file() and p.name != "INDEX.md"):
        g = groups.setdefault(f"{f.parent.relative_to(root)}/{stem_of(f)}", Group(stem_of(f)))
        g.files.append(f)
        if f.suffix == ".json":
            try:
                doc = json.loads(f.read_text())
            except ValueError:
                continue
            if isinstance(doc, dict):
                g.meta = doc.get("meta") if isinstance(doc.get("meta"), dict) else g.meta
                if isinstance(doc.get("records"), list) and not f.name.endswith(".partial.json"):
                    g.records, g.summary = len(doc["records"]), doc.get("summary")
            elif isinstance(doc, list) and g.records is None:
                g.records = len(doc)
    return groups


def _scrubbed(v: Any) -> Any:
    if isinstance(v, str):
        return scrub(v)
    if isinstance(v, list):
        return [_scrubbed(x) for x in v]
    if isinstance(v, dict):
        return {k: _scrubbed(x) for k, x in v.items()}
    return v


def _scrub_meta(f: Path) -> None:
    """Machine paths out of a result's meta (its command and solution folders); the rest untouched."""
    try:
        doc = json.loads(f.read_text())
    except ValueError:
        return
    if not isinstance(doc, dict) or not isinstance(doc.get("meta"), dict):
        return
    meta = doc["meta"]
    clean = _scrubbed(meta)
    if clean != meta:
        doc["meta"] = clean
        f.write_text(json.dumps(doc, indent=2, default=str) + "\n")


def reorganize(root: Path = RESULTS) -> None:
    groups = collect(root)
    finished = {g.stem for g in groups.values() if not g.partial}
    latest: dict[tuple[str, str, str, str], Group] = {}
    for g in groups.values():
        k = g.key()
        if k is not None and (k not in latest or (g.when, g.stem) > (latest[k].when, latest[k].stem)):
            latest[k] = g
    keep = {id(g) for g in latest.values()}
    for g in groups.values():
        home = root / ("latest" if id(g) in keep else "archive")
        home.mkdir(exist_ok=True)
        stem = _free_stem(g, home)
        for f in g.files:
            if f.name.endswith(".partial.json") and g.stem in finished:
                f.unlink()  # the finished run of the same name holds every record
                continue
            if f.parent != home:
                f = f.rename(home / (stem + f.name[len(g.stem):]))
            if f.suffix == ".json":
                _scrub_meta(f)


def _free_stem(g: Group, home: Path) -> str:
    """`g`'s stem, or the first `-rN` after it that no other result in `home` has (a file of the same name
    there is another run: moving over it would lose it)."""
    if not any((home / f.name).exists() for f in g.files if f.parent != home):
        return g.stem
    base = re.sub(r"-r\d+$", "", g.stem)
    n = 2
    while any(stem_of(p) == f"{base}-r{n}" for p in home.iterdir()):
        n += 1
    return f"{base}-r{n}"


def _figure(g: Group) -> str:
    s = g.summary or {}
    parts = [f"{s['correct']}/{s['problems']} correct"] if "correct" in s and "problems" in s else []
    for key, v in s.items():
        if key.startswith("geomean_speedup_vs_") and isinstance(v, (int, float)):
            parts.append(f"{v:.3g}x {key.removeprefix('geomean_speedup_vs_')}")
    return ", ".join(parts) or "-"


def index_text(root: Path = RESULTS) -> str:
    groups = sorted(collect(root).values(), key=lambda g: (g.date, g.stem), reverse=True)
    lines = ["# Results", "",
             "Written by `python benchmarks/results_index.py` from each result's `meta` (do not edit by hand).",
             "`latest/` holds the newest whole run of each benchmark set per machine, set, DSL and precision;",
             "`archive/` every earlier run, partial run and single experiment. A commit of \"not recorded\" marks",
             "a result from before results recorded their commit, versions and machine.", "",
             "## Latest", "", "| machine | set | DSL | precision | date | commit | summary | files |",
             "|---|---|---|---|---|---|---|---|"]
    for g in groups:
        if g.files and g.files[0].parent.name == "latest":
            files = ", ".join(f"[{f.name}](latest/{f.name})" for f in g.files)
            lines.append(f"| {g.machine()} | {g.benchmark_set()} | {g.dsl()} | {g.precision()} | {g.date} | "
                         f"{_commit(g)} | {_figure(g)} | {files} |")
    lines += ["", "## Archive", "", "| date | machine | DSL | name | commit | files |", "|---|---|---|---|---|---|"]
    for g in groups:
        if g.files and g.files[0].parent.name != "latest":
            files = ", ".join(f"[{f.suffix.lstrip('.') or f.name}]({f.relative_to(root).as_posix()})" for f in g.files)
            lines.append(f"| {g.date} | {g.machine()} | {g.dsl()} | {g.stem} | {_commit(g)} | {files} |")
    return "\n".join(lines) + "\n"


def _commit(g: Group) -> str:
    c = g.meta.get("commit")
    return str(c)[:12] + ("+dirty" if str(c).endswith("+dirty") else "") if c else "not recorded"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--root", type=Path, default=RESULTS)
    p.add_argument("--reorganize", action="store_true", help="sort loose results into latest/ and archive/ first")
    p.add_argument("--check", action="store_true", help="exit 1 where INDEX.md is out of date")
    args = p.parse_args(argv)
    if args.reorganize:
        reorganize(args.root)
    text = index_text(args.root)
    index = args.root / "INDEX.md"
    if args.check:
        loose = [f.name for f in args.root.iterdir() if f.is_file() and f.name != "INDEX.md"]
        ok = index.is_file() and index.read_text() == text and not loose
        print("INDEX.md is up to date" if ok else "INDEX.md is out of date (or results lie loose): run "
              "python benchmarks/results_index.py --reorganize")
        return 0 if ok else 1
    index.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
