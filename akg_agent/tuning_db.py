"""The tuning database: every measurement `akg tune` takes, keyed by hardware, DSL, kernel signature (the
problem and the kernel's structure), versions and schedule (SQLite, committed as each arrives), and
verified modules for retrieval into prompts. `akg translate` reads each kernel's best measured schedule from it."""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import math
import sqlite3
import time
from pathlib import Path
from typing import Any

import torch

from dsl_backends import Manifest
from hardware_models.spec import HardwareModel, cache_dir, host_cpu_id
from ir.kernel.ir import Kernel
from ir.kernel.schedule import Schedule
from ir.kernel.structure import structure_key

from .verifier import device_for, timed_on
from .version import __version__

SCHEMA = """CREATE TABLE IF NOT EXISTS measurements (
    hardware TEXT, dsl TEXT, kernel TEXT, versions TEXT, schedule TEXT, time_s REAL, verdict TEXT, at REAL,
    PRIMARY KEY (hardware, dsl, kernel, versions, schedule));
CREATE TABLE IF NOT EXISTS strategies (
    hardware TEXT, dsl TEXT, problem TEXT, versions TEXT, strategy TEXT, time_s REAL, verdict TEXT, at REAL,
    PRIMARY KEY (hardware, dsl, problem, versions, strategy));
CREATE TABLE IF NOT EXISTS choices (
    hardware TEXT, dsl TEXT, problem TEXT, versions TEXT, strategy TEXT, time_s REAL, at REAL,
    PRIMARY KEY (hardware, dsl, problem, versions));
CREATE TABLE IF NOT EXISTS kernel_choices (
    hardware TEXT, dsl TEXT, kernel TEXT, versions TEXT, schedule TEXT, time_s REAL, at REAL,
    PRIMARY KEY (hardware, dsl, kernel, versions));
CREATE TABLE IF NOT EXISTS verified_modules (
    hardware TEXT, dsl TEXT, problem TEXT, ops TEXT, source TEXT, time_ms REAL, by TEXT, at REAL,
    PRIMARY KEY (hardware, dsl, problem, by));
CREATE TABLE IF NOT EXISTS filter_rows (
    hardware TEXT, dsl TEXT, kernel TEXT, versions TEXT, schedule TEXT, features TEXT, rel REAL, at REAL,
    PRIMARY KEY (hardware, dsl, kernel, versions, schedule))"""


def versions(manifest: Manifest) -> str:
    """What a measurement depends on besides the hardware: akg, torch, and the packages the backend's
    manifest names (its compiler or runtime)."""
    parts = [f"akg={__version__}", f"torch={torch.__version__}"]
    for pkg in manifest.versioned:
        try:
            parts.append(f"{pkg}={importlib.metadata.version(pkg)}")
        except importlib.metadata.PackageNotFoundError:
            parts.append(f"{pkg}=absent")
    return ";".join(parts)


class TuningDB:
    @staticmethod
    def default_path() -> Path:
        return cache_dir() / "tuning.sqlite"

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or self.default_path()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(self.path)
        self.db.executescript(SCHEMA)

    def get(self, hw: str, dsl: str, kernel: str, ver: str, sched: Schedule) -> float | None:
        row = self.db.execute("SELECT time_s FROM measurements WHERE hardware=? AND dsl=? AND kernel=? AND "
                              "versions=? AND schedule=?", (hw, dsl, kernel, ver, _key(sched))).fetchone()
        return None if row is None else row[0]

    def put(self, hw: str, dsl: str, kernel: str, ver: str, sched: Schedule, t: float, verdict: str) -> None:
        with self.db:  # committed at once: a killed run keeps it
            self.db.execute("INSERT OR REPLACE INTO measurements VALUES (?,?,?,?,?,?,?,?)",
                            (hw, dsl, kernel, ver, _key(sched), t, verdict, time.time()))

    def put_kernel_choice(self, hw: str, dsl: str, kernel: str, ver: str, sched: Schedule, t: float) -> None:
        """The schedule `akg tune` chose for a kernel signature: among medians within its tie band the cost
        model's ranking decides, which the measurements alone cannot tell translate."""
        with self.db:
            self.db.execute("INSERT OR REPLACE INTO kernel_choices VALUES (?,?,?,?,?,?,?)",
                            (hw, dsl, kernel, ver, _key(sched), t, time.time()))

    def put_strategy(self, hw: str, dsl: str, problem: str, ver: str, strategy: dict[str, Any], t: float,
                     verdict: str) -> None:
        """A whole module's time under one strategy, its schedules tuned (committed at once); `akg tune`
        stores it scaled to its run's first eager time (`tune._steadied`)."""
        with self.db:
            self.db.execute("INSERT OR REPLACE INTO strategies VALUES (?,?,?,?,?,?,?,?)",
                            (hw, dsl, problem, ver, json.dumps(strategy, sort_keys=True), t, verdict, time.time()))

    def get_strategy(self, hw: str, dsl: str, problem: str, ver: str, strategy: dict[str, Any]) -> float | None:
        """A strategy's module time measured before (inf: it failed), or None."""
        key = (hw, dsl, problem, ver, json.dumps(strategy, sort_keys=True))
        row = self.db.execute("SELECT time_s FROM strategies WHERE hardware=? AND dsl=? AND problem=? AND versions=? "
                              "AND strategy=?", key).fetchone()
        return None if row is None or row[0] is None else row[0]

    def put_choice(self, hw: str, dsl: str, problem: str, ver: str, strategy: dict[str, Any], t: float) -> None:
        """The strategy `akg tune` chose by timing every accepted strategy head to head, and its time there
        (scaled as the strategies' are): translate takes it before the strategies' separate times."""
        with self.db:
            self.db.execute("INSERT OR REPLACE INTO choices VALUES (?,?,?,?,?,?,?)",
                            (hw, dsl, problem, ver, json.dumps(strategy, sort_keys=True), t, time.time()))

    def get_choice(self, hw: str, dsl: str, problem: str, ver: str) -> tuple[dict[str, Any], float] | None:
        row = self.db.execute("SELECT strategy, time_s FROM choices WHERE hardware=? AND dsl=? AND problem=? AND "
                              "versions=?", (hw, dsl, problem, ver)).fetchone()
        return None if row is None else (json.loads(row[0]), row[1])

    def winners(self, hw: str, dsl: str, ver: str, but: str = "") -> list[dict[str, Any]]:
        """Each problem's winning strategy so far on this hardware, DSL and versions (`but` left out): its
        head-to-head choice, else the fastest of its strategies' own runs (a tune cut short has no choice)."""
        rows = self.db.execute("SELECT problem, strategy, time_s FROM strategies WHERE hardware=? AND dsl=? AND "
                               "versions=?", (hw, dsl, ver)).fetchall()
        best: dict[str, tuple[float, str]] = {}
        for problem, strategy, t in rows:
            if t is not None and math.isfinite(t) and (problem not in best or t < best[problem][0]):
                best[problem] = (t, strategy)
        chosen = dict(self.db.execute("SELECT problem, strategy FROM choices WHERE hardware=? AND dsl=? AND "
                                      "versions=?", (hw, dsl, ver)).fetchall())
        return [json.loads(chosen.get(p, b[1])) for p, b in best.items() if p != but] + \
            [json.loads(st) for p, st in chosen.items() if p not in best and p != but]

    def remember_module(self, hw: str, dsl: str, problem: str, ops: str, source: str, time_ms: float | None,
                        by: str) -> None:
        """A verified module, kept for retrieval into later prompts (the best per problem and author)."""
        old = self.db.execute("SELECT time_ms FROM verified_modules WHERE hardware=? AND dsl=? AND problem=? AND by=?",
                              (hw, dsl, problem, by)).fetchone()
        if old is not None and old[0] is not None and (time_ms is None or old[0] <= time_ms):
            return
        with self.db:
            self.db.execute("INSERT OR REPLACE INTO verified_modules VALUES (?,?,?,?,?,?,?,?)",
                            (hw, dsl, problem, ops, source, time_ms, by, time.time()))

    def verified_modules(self, hw: str, dsl: str) -> list[tuple[str, str, str]]:
        """(problem, ops, source) of every verified module for this hardware and DSL."""
        return self.db.execute("SELECT problem, ops, source FROM verified_modules WHERE hardware=? AND dsl=? "
                               "ORDER BY problem, by", (hw, dsl)).fetchall()

    def put_filter_rows(self, hw: str, dsl: str, kernel: str, ver: str,
                        rows: list[tuple[Schedule, dict[str, float], float]]) -> None:
        """A kernel's rows for `akg tune --learned` (`tune_filter`): each schedule's features and log time
        against the kernel's default."""
        with self.db:
            self.db.executemany("INSERT OR REPLACE INTO filter_rows VALUES (?,?,?,?,?,?,?,?)",
                                [(hw, dsl, kernel, ver, _key(s), json.dumps(f, sort_keys=True), rel, time.time())
                                 for s, f, rel in rows])

    def filter_rows(self, hw: str, dsl: str, ver: str, last: int = 400) -> list[tuple[dict[str, float], float]]:
        """The `last` rows measured on this hardware with this DSL and versions, oldest first."""
        got = self.db.execute("SELECT features, rel FROM filter_rows WHERE hardware=? AND dsl=? AND versions=? "
                              "ORDER BY at DESC LIMIT ?", (hw, dsl, ver, last)).fetchall()
        return [(json.loads(f), rel) for f, rel in reversed(got)]

    def count(self) -> int:
        return self.db.execute("SELECT COUNT(*) FROM measurements").fetchone()[0]


def _key(sched: Schedule) -> str:
    return json.dumps(dict(sorted(sched.items())))


def kernel_signature(problem: str, k: Kernel) -> str:
    """A kernel of a problem (`problem_signature`) by its structure: kernels of one structure in a problem
    (an unrolled recurrence's steps) share their measurements, so the tuner searches one of them and the
    rest are served. Other problems' kernels do not: a measurement is the time of the whole module."""
    return hashlib.sha256(f"{problem}\n{structure_key(k)}".encode()).hexdigest()[:24]


def hardware_key(target: HardwareModel) -> str:
    """The hardware a measurement belongs to: the model's name, the calibrated profile's if any, and the
    card that times where it is not the target's (an H200 lent for an H100 target: its times are the
    H200's, never served to a tune or translate on a real H100); for the host CPU, which CPU it is (a
    database copied to, or a VM moved onto, another CPU under the same name measures again)."""
    card = timed_on(target.name, device_for(target.name)) if target.kind == "gpu" else None
    return target.name + (f" ({target.calibrated_from})" if target.calibrated_from else "") + \
        (f" timed on {card}" if card else "") + (f" on {host_cpu_id()}" if target.kind == "cpu" else "")


def problem_signature(path: Path) -> str:
    """A problem is known by its source text (sizes and init arguments live in it)."""
    return hashlib.sha256(path.read_bytes()).hexdigest()[:24]


def best_strategy(path: Path, hw: str, dsl: str, problem: str, ver: str) -> tuple[dict[str, Any], float] | None:
    """The strategy whose tuned module ran fastest for this problem on this hardware and versions: the
    head-to-head run's choice where a tune made one, else the fastest of the strategies' own runs."""
    if not path.is_file():
        return None
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        try:
            chosen = db.execute("SELECT strategy, time_s FROM choices WHERE hardware=? AND dsl=? AND problem=? AND "
                                "versions=?", (hw, dsl, problem, ver)).fetchone()
        except sqlite3.OperationalError:  # a database from before head-to-head choices
            chosen = None
        if chosen is not None and chosen[1] is not None and math.isfinite(chosen[1]):
            return json.loads(chosen[0]), chosen[1]
        try:
            rows = db.execute("SELECT strategy, time_s FROM strategies WHERE hardware=? AND dsl=? AND problem=? AND "
                              "versions=? ORDER BY time_s, strategy", (hw, dsl, problem, ver)).fetchall()
        except sqlite3.OperationalError:  # a database from before strategies were measured
            return None
    for strategy, t in rows:
        if t is not None and math.isfinite(t):
            return json.loads(strategy), t
    return None


def best_schedule(path: Path, hw: str, dsl: str, kernel: str, ver: str) -> tuple[Schedule, float] | None:
    """The schedule a tune chose for this kernel on this hardware and versions, else the fastest accepted one
    measured (a tune cut short), if any (read-only: a machine that never tuned has no database, and none is
    made for it)."""
    if not path.is_file():
        return None
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        try:
            chosen = db.execute("SELECT schedule, time_s FROM kernel_choices WHERE hardware=? AND dsl=? AND kernel=? "
                                "AND versions=?", (hw, dsl, kernel, ver)).fetchone()
        except sqlite3.OperationalError:  # a database from before kernel choices
            chosen = None
        if chosen is not None and chosen[1] is not None and math.isfinite(chosen[1]):
            return Schedule(json.loads(chosen[0])), chosen[1]
        rows = db.execute("SELECT schedule, time_s FROM measurements WHERE hardware=? AND dsl=? AND kernel=? AND "
                          "versions=? ORDER BY time_s, schedule", (hw, dsl, kernel, ver)).fetchall()
    for sched, t in rows:
        if t is not None and math.isfinite(t):
            return Schedule(json.loads(sched)), t
    return None
