"""`akg tune`: per-kernel schedule search, pruned by the cost model, measured with the verifier's
timing in the sandbox (in this process or on Ray), remembered in the tuning database (`tuning_db`):
a repeated run is instant and a killed run loses no finished measurement."""

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
from ir.errors import AkgError
from ir.kernel.schedule import Schedule

from .cluster import Cluster, Done, Work
from .ranking import ranked_space
from .translate import Translation, build, render
from .tuning_db import TuningDB, hardware_key, kernel_signature, versions
from .verifier import Verdict, device_for, verify


def _candidate(kernel: str, sched: Schedule, median_s: float, v: Verdict, where: dict[str, Any]) -> dict[str, Any]:
    """One measured schedule: its time and verdict, and its error against float64 beside torch's own
    (how a split-precision GEMM earns its place), and where it was timed."""
    rows = [r for r in v.details.get("trials", []) if r.get("vs_float64")]
    return {"kernel": kernel, "schedule": dict(sched), "median_s": median_s if math.isfinite(median_s) else None,
            "verdict": v.line(), "max_err_vs_float64": max((r["max_abs_err"] for r in rows), default=None),
            "torch_err_vs_float64": max((r["ref_max_abs_err"] for r in rows), default=None), **where}


def _with(t: Translation, kernel: str, sched: Schedule) -> Translation:
    """The translation with one kernel's schedule replaced (the original untouched)."""
    return dataclasses.replace(t, schedules={**t.schedules, kernel: sched}, _body=None)


def _local(problem: Path, target: str) -> Callable[[list[Work]], Iterator[Done]]:
    """Candidates measured one after another in this process's sandbox."""
    device = f"{socket.gethostname()}:{device_for(target)}"

    def run(works: list[Work]) -> Iterator[Done]:
        with tempfile.TemporaryDirectory(prefix="akg-tune-") as d:
            for w in works:
                path = Path(d) / f"cand_{w.key[0]}_{w.key[1]}.py"
                path.write_text(w.source)
                v = verify(problem, path, target=target, seeds=w.seeds, timing=True, sol_check=False)
                yield Done(w, v.to_json(), host=socket.gethostname(), device=device)
    return run


def tune(problem: str, target: str, dsl: str, budget: int = 8, time_limit_s: float | None = None,
         out: str | Path | None = None, db: TuningDB | None = None,
         on_progress: Callable[[str, int, int, float | None, Done | None], None] | None = None,
         ray: str | None = None, ray_cpus: int | None = None) -> dict[str, Any]:
    """`ray`: None tunes in this process; "" on a local Ray started for the run; else the cluster's
    address. Candidates of one kernel are measured together (in parallel on Ray), kernels in order, each
    against the best schedules of those before it."""
    t = build(problem, dsl, target, tuned=False)  # the cost model's schedules: the database keys kernels by them
    if t.executor != "native":
        raise AkgError(f"tuning needs the {target} device here: {dsl} would run through its {t.executor}, "
                       "whose times mean nothing")
    backend = get_backend(dsl)
    db = db or TuningDB()
    ver = versions(backend.manifest)
    hw = hardware_key(t.target)
    groups = {g.id: g for g in t.plan.groups}
    start = time.perf_counter()
    report: dict[str, Any] = {"problem": str(problem), "target": target, "dsl": dsl, "kernels": [], "measured": 0,
                              "from_db": 0, "candidates": [], "lost": [], "ray": ray}
    cluster = Cluster(ray or None, target, ray_cpus) if ray is not None else None
    measure = cluster.run if cluster is not None else _local(t.problem, target)
    src = t.problem.read_text()
    try:
        for k in t.program.kernels():
            space = ranked_space(backend, k, groups.get(k.group), t.target)
            default = t.schedules[k.name]
            cands = ([default] + [s for s in space if s != default])[:budget]
            sig = kernel_signature(backend.render_kernel(k, default, t.target))
            times: dict[int, float] = {}
            works: list[Work] = []
            for i, sched in enumerate(cands):
                if time_limit_s is not None and time.perf_counter() - start > time_limit_s:
                    break
                known = db.get(hw, dsl, sig, ver, sched)
                if known is None:
                    works.append(Work((k.name, i), t.problem.name, src, render(_with(t, k.name, sched))))
                else:
                    times[i] = known
                    report["from_db"] += 1
            tried = len(times) + len(works)
            for done in measure(works):
                i = done.work.key[1]
                if done.verdict is None:  # lost: not committed, so a rerun tries it again
                    report["lost"].append({"kernel": k.name, "schedule": dict(cands[i]), "why": done.lost})
                else:
                    v = Verdict(**done.verdict)
                    med = v.details.get("timing", {}).get("candidate", {}).get("median_s") if v.accepted else None
                    times[i] = med if med is not None else math.inf
                    db.put(hw, dsl, sig, ver, cands[i], times[i], v.line())  # committed as it arrives
                    report["measured"] += 1
                    report["candidates"].append(_candidate(k.name, cands[i], times[i], v, {
                        "host": done.host, "device": done.device, "attempts": done.attempts,
                        "checked_by": done.checked_by}))
                if on_progress is not None:
                    best_now = min(times.values(), default=None)
                    on_progress(k.name, len(times) + len(report["lost"]), tried, best_now, done)
            # the fastest, the earlier candidate on a tie (the same choice whichever finished first)
            best = min(times, key=lambda j: (times[j], j)) if times else None
            ok = best is not None and math.isfinite(times[best])
            t.schedules[k.name] = cands[best] if ok else default
            report["kernels"].append({"kernel": k.name, "kind": k.kind, "best": dict(t.schedules[k.name]),
                                      "best_s": times[best] if best is not None else None, "tried": tried})
    finally:
        if cluster is not None:
            report["workers"] = cluster.workers
            cluster.close()
    # the chosen combination is verified and timed once more, and the header says so
    with tempfile.TemporaryDirectory(prefix="akg-tune-") as d:
        final = Path(d) / f"{t.problem.stem}_{dsl}.py"
        final.write_text(render(t))
        t.verdict = verify(t.problem, final, target=target, timing=True, baselines=("eager",))
    if not t.verdict.accepted:
        raise AkgError(f"the tuned {dsl} module for {t.problem.name} failed verification: {t.verdict.reason}")
    t.source = render(t, t.verdict.details.get("timing"))
    report["verdict"] = t.verdict.line()
    if out is not None:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text(t.source)
    report["elapsed_s"] = time.perf_counter() - start
    return report
