"""`akg tune`'s schedule search inside one strategy: each kernel structure's candidates measured (on
this host's sandbox, or spread over a cluster's devices), the finalists that different devices timed
timed again together on one, every time committed to the tuning database as it arrives."""

from __future__ import annotations

import dataclasses
import math
import socket
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from dsl_backends import get_backend
from ir.kernel.ir import Kernel
from ir.kernel.schedule import Schedule

from .cluster import Cluster, Done, LocalPool, Work, build_dir
from .ranking import ranked_space
from .translate import Translation, render
from .tuning_db import TuningDB, hardware_key, kernel_signature, problem_signature, versions
from .verifier import TRANSIENT, Verdict, device_for, verify
from .verifier.timing import host_lock

# relative: schedules whose medians differ by less are taken as equally fast (two GPUs of one host, or two
# runs on one, order such candidates either way; benchmarks/results/h100x2-ray-tune-*.json)
TIE = 0.01
# relative: finalists within this of the fastest that different devices timed are timed again together on
# one (two GPUs of one host differ in pace by several percent, more than TIE)
SPREAD = 0.05

Progress = Callable[[str, int, int, float | None, Done | None], None]


@dataclasses.dataclass
class _Search:
    """One structure's search: its candidates, their times as they arrive and the device that timed each."""
    k: Kernel
    sig: str
    kernels: list[str]  # every kernel of the structure (an unrolled recurrence's steps): one candidate sets all
    cands: list[Schedule]
    times: dict[int, float] = dataclasses.field(default_factory=dict)
    where: dict[int, str] = dataclasses.field(default_factory=dict)
    tried: int = 0
    lost: int = 0


def _candidate(kernel: str, sched: Schedule, median_s: float, v: Verdict, where: dict[str, Any]) -> dict[str, Any]:
    """One measured schedule: its time and verdict, and its error against float64 beside torch's own
    (how a split-precision GEMM earns its place), and where it was timed."""
    rows = [r for r in v.details.get("trials", []) if r.get("vs_float64")]
    return {"kernel": kernel, "schedule": dict(sched), "median_s": median_s if math.isfinite(median_s) else None,
            "verdict": v.line(), "max_err_vs_float64": max((r["max_abs_err"] for r in rows), default=None),
            "torch_err_vs_float64": max((r["ref_max_abs_err"] for r in rows), default=None),
            "phase_s": v.details.get("phase_s"), **where}


def _with(t: Translation, kernels: list[str], sched: Schedule) -> Translation:
    """The translation with these kernels' schedule replaced (the original untouched)."""
    return dataclasses.replace(t, schedules={**t.schedules, **{n: sched for n in kernels}}, _body=None)


def _local(problem: Path, target: str) -> Callable[[list[Work]], Iterator[Done]]:
    """Candidates measured one after another in this process's sandbox."""
    device = f"{socket.gethostname()}:{device_for(target)}"

    def run(works: list[Work]) -> Iterator[Done]:
        with tempfile.TemporaryDirectory(prefix="akg-tune-") as d:
            for w in works:
                path = Path(d) / f"cand_{w.key[0]}_{w.key[1]}.py"
                path.write_text(w.source)
                v = verify(problem, path, target=target, seeds=w.seeds, timing=True, sol_check=False,
                           timing_lock=host_lock(target), build_cache=build_dir(w) if w.shared_build else None)
                yield Done(w, v.to_json(), host=socket.gethostname(), device=device)
    return run


def search_schedules(t: Translation, budget: int, time_limit_s: float | None, start: float, db: TuningDB,
                     report: dict[str, Any], cluster: Cluster | LocalPool | None, on_progress: Progress | None,
                     shared: str) -> list[dict[str, Any]]:
    """Each kernel structure's schedules measured; `t.schedules` ends with the best. Kernels of one
    structure (`kernel_signature`: an unrolled recurrence's steps) are searched as one: each candidate
    sets all of them, so the module's time moves by all of their share of it. On one device the
    structures go in order, each against the best schedules of those before it. Where several devices
    time at once (`cluster.parallel_timing`), every structure's candidates go out together, each against
    the schedules the search started from: one structure's few candidates left all but one or two
    devices idle (a transformer block on two H100s took as long as on one)."""
    backend = get_backend(t.dsl)
    ver, hw, dsl = versions(backend.manifest), hardware_key(t.target), t.dsl
    groups = {g.id: g for g in t.plan.groups}
    measure = cluster.run if cluster is not None else _local(t.problem, t.target.name)
    src = t.problem.read_text()
    problem_sig = problem_signature(t.problem)
    sigs = {k.name: kernel_signature(problem_sig, k) for k in t.program.kernels()}
    alike: dict[str, list[str]] = {}  # signature -> its kernels, in program order
    for name, sig in sigs.items():
        alike.setdefault(sig, []).append(name)
    rows: dict[str, dict[str, Any]] = {}
    searches: list[_Search] = []
    for k in t.program.kernels():
        sig = sigs[k.name]
        if alike[sig][0] != k.name:  # searched with the first of its structure
            continue
        default = t.schedules[k.name]
        space = ranked_space(backend, k, groups.get(k.group), t.target)
        cands = ([default] + [s for s in space if s != default])[:budget]
        if len(cands) == 1:  # nothing to choose: the strategy's module verification checks and times it
            rows[k.name] = {"kernel": k.name, "kind": k.kind, "best": dict(default), "best_s": None, "tried": 0}
            continue
        searches.append(_Search(k, sig, alike[sig], cands))

    def keep(s: _Search, i: int, sec: float, line: str) -> None:
        db.put(hw, dsl, s.sig, ver, s.cands[i], sec, line)

    waves = [searches] if cluster is not None and cluster.parallel_timing else [[s] for s in searches]
    for wave in waves:
        works: list[Work] = []
        for s in wave:  # rendered now: against the best schedules of the waves before
            for i, sched in enumerate(s.cands):
                if time_up(start, time_limit_s):
                    report["time_limit_hit"] = True
                    break
                known = db.get(hw, dsl, s.sig, ver, sched)
                if known is None:
                    works.append(Work((s.k.name, i), t.problem.name, src, render(_with(t, s.kernels, sched)),
                                      shared_build=shared))
                    s.tried += 1
                else:
                    s.times[i] = known
                    s.tried += 1
                    report["from_db"] += 1
        of = {s.k.name: s for s in wave}
        for done in _until(measure(works), start, time_limit_s, report):
            s = of[done.work.key[0]]
            i = done.work.key[1]
            if done.verdict is None:  # lost: not committed, so a rerun tries it again
                s.lost += 1
                report["lost"].append({"kernel": s.k.name, "schedule": dict(s.cands[i]), "why": done.lost})
            else:
                v = Verdict(**done.verdict)
                med = v.details.get("timing", {}).get("candidate", {}).get("median_s") if v.accepted else None
                s.times[i] = med if med is not None else math.inf
                s.where[i] = done.device
                if v.accepted or v.code not in TRANSIENT:
                    keep(s, i, s.times[i], v.line())  # committed as it arrives
                report["measured"] += 1
                report["candidates"].append(_candidate(s.k.name, s.cands[i], s.times[i], v, {
                    "host": done.host, "device": done.device, "attempts": done.attempts,
                    "checked_by": done.checked_by}))
            if on_progress is not None:
                on_progress(s.k.name, len(s.times) + s.lost, s.tried, min(s.times.values(), default=None), done)
        if not time_up(start, time_limit_s):
            _on_one_device(t, src, wave, measure, report, keep)
        for s in wave:
            best = _fastest(s.times)
            ok = best is not None and math.isfinite(s.times[best])
            t.schedules = _with(t, s.kernels, s.cands[best] if ok else s.cands[0]).schedules
            rows[s.k.name] = {"kernel": s.k.name, "kind": s.k.kind, "best": dict(t.schedules[s.k.name]),
                              "best_s": s.times[best] if best is not None else None, "tried": s.tried}
    firsts = {name: alike[sig][0] for name, sig in sigs.items()}
    return [rows[name] if first == name else {**rows[first], "kernel": name, "tried": 0, "same_as": first}
            for name, first in firsts.items()]


def _on_one_device(t: Translation, problem_src: str, wave: list[_Search],
                   measure: Callable[[list[Work]], Iterator[Done]], report: dict[str, Any],
                   keep: Callable[[_Search, int, float, str], None]) -> None:
    """Each search's finalists (within SPREAD of its fastest) timed once more, in turns in one run on one
    device, where different devices timed them: their own runs differ by the devices' pace. The wave's
    runs go out together. Each new time replaces the old, in the database too (`keep`), so a rerun
    chooses alike. A search stays as it was where one device timed all its finalists, or the run fails."""
    runs: dict[str, tuple[_Search, list[int], Work]] = {}
    for s in wave:
        low = min((sec for sec in s.times.values() if math.isfinite(sec)), default=math.inf)
        fin = sorted(i for i, sec in s.times.items() if sec <= low * (1 + SPREAD))
        if len(fin) < 2 or len({s.where.get(i, "") for i in fin}) < 2:
            continue
        bodies = [render(_with(t, s.kernels, s.cands[i])) for i in fin]
        runs[s.k.name] = (s, fin, Work((s.k.name, "together"), t.problem.name, problem_src, bodies[0],
                                       peers=tuple((str(i), body) for i, body in zip(fin[1:], bodies[1:]))))
    if not runs:
        return
    got = {d.work.key[0]: d for d in measure([w for _, _, w in runs.values()])}
    for name, (s, fin, _) in runs.items():
        done = got.get(name)
        v = Verdict(**done.verdict) if done is not None and done.verdict is not None else None
        timing = v.details.get("timing", {}) if v is not None and v.accepted else {}
        meds = [timing.get("candidate", {}).get("median_s")] + [
            timing.get("peers", {}).get(str(i), {}).get("median_s") for i in fin[1:]]
        row: dict[str, Any] = {"kernel": name, "timed_on": sorted({s.where[i] for i in fin if i in s.where})}
        report.setdefault("together", []).append(row)
        if v is None or not all(meds):
            row["verdict"] = v.line() if v is not None else f"lost: {done.lost if done else 'no result'}"
            continue
        assert done is not None
        new = {i: float(sec) for i, sec in zip(fin, meds) if sec}
        row.update(device=done.device, before={str(i): s.times[i] for i in fin}, after={str(i): new[i] for i in fin})
        for i in fin:
            keep(s, i, new[i], v.line())
        s.times.update(new)


def _fastest(times: dict[int, float]) -> int | None:
    """The earliest candidate in the cost model's ranking among those within TIE of the fastest: medians
    closer than that are one time to the timer (two runs order them either way), so the ranking decides,
    and the choice is the same whichever device or run measured them."""
    if not times:
        return None
    low = min(times.values())
    return min(j for j, s in times.items() if s <= low * (1 + TIE))


def time_up(start: float, limit_s: float | None) -> bool:
    return limit_s is not None and time.perf_counter() - start > limit_s


def _until(done: Iterator[Done], start: float, limit_s: float | None, report: dict[str, Any]) -> Iterator[Done]:
    """Results as they arrive until the time limit passes; then the source is closed, so candidates not
    yet started are dropped (those running finish: a limit is overrun by at most one candidate's time)."""
    try:
        for d in done:
            yield d
            if time_up(start, limit_s):
                report["time_limit_hit"] = True
                return
    finally:
        close = getattr(done, "close", None)
        if close is not None:
            close()
