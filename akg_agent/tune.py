"""`akg tune`: per-kernel schedule search, pruned by the cost model, measured with the verifier's
timing in the sandbox (in this process or on Ray), remembered in the tuning database (`tuning_db`):
a repeated run is instant and a killed run loses no finished measurement."""

from __future__ import annotations

import dataclasses
import math
import os
import shutil
import socket
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from dsl_backends import get_backend
from hardware_models.spec import HardwareModel
from ir.errors import AkgError
from ir.jax_lift import is_jax_problem
from ir.kernel.lower import conv_kinds, generated_conv
from ir.kernel.schedule import Schedule
from ir.passes.library import check_families

from .cluster import Cluster, Done, LocalPool, Work, build_dir, shared_build_dir
from .library_check import families
from .ranking import ranked_space
from .strategy import Strategy, untuned_strategy
from .translate import Translation, build, measured_as, render
from .tune_filter import LearnedFilter
from .tuning_db import TuningDB, hardware_key, kernel_signature, problem_signature, versions
from .verifier import TRANSIENT, Verdict, device_for, model_of, verify
from .verifier.timing import host_lock

# relative: schedules whose medians differ by less are taken as equally fast (two GPUs of one host, or two
# runs on one, order such candidates either way; benchmarks/results/archive/h100x2-ray-tune-*.json)
TIE = 0.01
# relative: finalists within this of the fastest that different devices timed are timed again together on
# one (two GPUs of one host differ in pace by several percent, more than TIE)
SPREAD = 0.05


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


def _local(problem: Path, target: HardwareModel) -> Callable[[list[Work]], Iterator[Done]]:
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


def strategies_for(t: Translation) -> list[Strategy]:
    """The plan-level alternatives worth measuring for this translation, the default first: row fusion
    split, generated convolutions, channels-last library ones, and each op family of the program left to
    the library (one at a time; `tune` then measures the families that won together, and grows the best by
    one family at a time)."""
    kinds = get_backend(t.dsl).manifest.kinds
    out = [Strategy()]
    if "rownorm" in kinds and any(k.kind == "rownorm" for k in t.program.kernels()):
        out.append(Strategy(rows=False))
    convs = [s for s in t.program.library_calls() if s.op == "conv" and s.args[0] and s.args[1]]
    gen = {c: any(generated_conv(s.attrs.get("groups", 1), s.args[0].shape, s.args[1].shape, conv_kinds(kinds) & {c})
                  for s in convs) for c in ("conv", "dwconv")}
    if any(gen.values()):
        out.append(Strategy(conv="generated"))
    if gen["conv"] and gen["dwconv"]:  # a depthwise-separable block: its 1x1 convolution may be the library's
        out.append(Strategy(conv="depthwise"))
    if any(s.op in ("conv", "conv_transpose") and s.args[0] and len(s.args[0].shape) in (4, 5)
           for s in t.program.library_calls()):  # torch's channels-last formats: 2-D and 3-D convolutions
        out.append(Strategy(conv="channels-last"))
    out += [Strategy(library=(f,)) for f in families(t)]
    return out


def _untuned_first(t: Translation) -> list[Strategy]:
    """`strategies_for`, the strategy an untuned translate takes first, one of them or not (`untuned_strategy`,
    e.g. GEMMs and an attention left to the library together: a --time limit that cut the tune after the
    all-generated default left translate a measured module slower than the untuned one)."""
    out, first = strategies_for(t), untuned_strategy(t.plan, get_backend(t.dsl), t.target, t.graph)[0]
    return [first, *(s for s in out if s != first)]


def _grow(measured: list[tuple[Strategy, float]], families: list[str], grown: set[Strategy]) -> list[Strategy]:
    """The fastest library strategy so far, each with one more family, once per strategy: a family can pay
    only beside another (attention and norms left to torch lose while the GEMMs around them stay
    generated, and win once those are torch's too). Only a strategy faster than the default grows."""
    default_s = _default_s(measured)
    lib = [(s, sec) for s, sec in measured if s.library and s == Strategy(library=s.library) and sec < default_s]
    if not lib:
        return []
    base = min(lib, key=lambda x: x[1])[0]
    if base in grown:
        return []
    grown.add(base)
    done = {s for s, _ in measured}
    more = [Strategy(library=check_families((*base.library, f))) for f in families if f not in base.library]
    return [s for s in more if s not in done]


def _default_s(measured: list[tuple[Strategy, float]]) -> float:
    """The default strategy's score (inf where a --time limit left it out: history put others first)."""
    return next((sec for s, sec in measured if s == Strategy()), math.inf)


def _by_history(todo: list[Strategy], won: list[dict[str, Any]]) -> list[Strategy]:
    """The strategies in order of how many other problems their choices won on this hardware and DSL
    (the default counts the wins of the default; a library strategy those of its families), ties in the
    given order. Measurement still decides; the order only decides what a --time limit leaves out: a
    TileLang linear's default (a SIMT GEMM, 90 s to compile and verify at real size) used the whole
    limit while the cuBLAS strategy, which had won on nine GEMM programs before, was never tried."""
    if not won:
        return todo
    past = [Strategy.from_json(w) for w in won]

    def wins(s: Strategy) -> int:
        if s.library and s == Strategy(library=s.library):  # a library strategy: the wins of its families
            return sum(bool(set(s.library) & set(p.library)) for p in past)
        return sum(p == s for p in past)

    return sorted(todo, key=lambda s: -wins(s))


def _together(singles: list[tuple[Strategy, float]], default_s: float) -> Strategy | None:
    """The library families that each beat the default alone, all at once (when there are two or more);
    `singles` may hold combinations measured since, which are not counted."""
    won = tuple(s.library[0] for s, sec in singles if sec < default_s and len(s.library) == 1
                and s == Strategy(library=s.library))
    return Strategy(library=check_families(won)) if len(won) > 1 else None


@dataclasses.dataclass(frozen=True)
class TuneOptions:
    """How a tune searches. `budget`: schedules measured per kernel; `time_limit_s`: no new strategy past it.
    `ray`: None tunes in this process; "" on a local Ray started for the run; else the cluster's address.
    `jobs` > 1 (without Ray): candidates compile and verify that many at a time here, and are timed one at a
    time. `strategies`: search the strategies (`strategies_for`), or only the default. `dynamic`: a module of
    run-time sizes (`--dynamic`), its candidates timed at the bound. `learned`: a model of the measurements
    so far picks which of a kernel's candidates to measure, at most a quarter (`tune_filter`)."""

    budget: int = 8
    time_limit_s: float | None = None
    ray: str | None = None
    ray_cpus: int | None = None
    strategies: bool = True
    jobs: int = 1
    dynamic: str | None = None
    learned: bool = False


def tune(problem: str, target: str | HardwareModel, dsl: str, options: TuneOptions | None = None,
         out: str | Path | None = None, db: TuningDB | None = None,
         on_progress: Callable[[str, int, int, float | None, Done | None], None] | None = None,
         **changes: Any) -> dict[str, Any]:
    """For each strategy (only the default when `options.strategies` is False) the schedules are searched,
    then the whole module is verified and timed; the fastest strategy's module is written, and every
    strategy's time goes to the database, where `akg translate` finds it. `changes`: `TuneOptions` fields
    by keyword."""
    o = dataclasses.replace(options or TuneOptions(), **changes)
    time_limit_s, ray, ray_cpus = o.time_limit_s, o.ray, o.ray_cpus
    strategies, jobs, dynamic = o.strategies, o.jobs, o.dynamic
    if is_jax_problem(Path(problem)):  # its verification is not timed yet
        raise AkgError(f"{Path(problem).name} is a JAX program: akg translate writes and verifies its module; "
                       "tuning takes PyTorch (KernelBench) problems only so far")
    model = model_of(target)  # loaded once: every build and verification below gets the value
    target = model.name  # the name travels to Ray workers and into the report
    # the cost model's schedules: the database keys kernels by them
    base = build(problem, dsl, model, tuned=False, dynamic=dynamic)
    if base.executor != "native":
        raise AkgError(f"tuning needs the {target} device here: {dsl} would run through its {base.executor}, "
                       "whose times mean nothing")
    db = db or TuningDB()
    start = time.perf_counter()
    report: dict[str, Any] = {"problem": str(problem), "target": target, "dsl": dsl, "kernels": [], "measured": 0,
                              "from_db": 0, "candidates": [], "lost": [], "ray": ray, "strategies": []}
    hw, _, sig, ver = _problem_key(base)
    if o.learned:
        report["learned"] = {"rows_at_start": len(db.filter_rows(hw, dsl, ver)), "not_measured": 0,
                             "kernels_by_model": 0}
    cluster: Cluster | LocalPool | None = (Cluster(ray or None, target, ray_cpus) if ray is not None else
                                           LocalPool(target, jobs) if jobs > 1 else None)
    best: tuple[float, Translation] | None = None
    # this run's candidates share compiled code (`Work.shared_build`); another run compiles afresh
    shared = f"{socket.gethostname()} {os.getpid()} {time.time()}"
    # a rerun replays its own search unchanged: only other problems' wins order it
    todo = _by_history(_untuned_first(base), db.winners(hw, dsl, ver, but=sig)) if strategies else [Strategy()]
    measured: list[tuple[Strategy, float]] = []
    grown: set[Strategy] = set()  # library strategies already grown by one family
    scored: list[tuple[float, Translation, dict[str, Any]]] = []  # accepted strategies: score, module, row
    eager_ref: float | None = None  # the eager time measured with the first strategy timed in this run
    try:
        while todo:
            strategy = todo.pop(0)
            # the first strategy that passes always gets a module, past the limit too
            if best is not None and math.isfinite(best[0]) and _past(start, time_limit_s):
                report["strategies"].append({"strategy": strategy.describe(), "time_s": None,
                                             "verdict": f"not tried: the --time limit ({time_limit_s:g} s) passed"})
                report["time_limit_hit"] = True
                continue
            try:
                t = base if strategy == Strategy() else build(problem, dsl, model, tuned=False, rows=strategy.rows,
                                                              conv=strategy.conv, dynamic=dynamic,
                                                              library=strategy.library)
            except AkgError as e:  # this strategy cannot express the problem: reported, not fatal
                report["strategies"].append({"strategy": strategy.describe(), "time_s": None, "verdict": str(e)})
                continue
            before = report["measured"]
            kernels = _tune_schedules(t, o, start, db, report, cluster, on_progress, shared)
            key = (*_problem_key(t), measured_as(t))
            # every schedule came from the database: the same module as the run that timed this strategy
            known = db.get_strategy(*key) if report["measured"] == before else None
            if known is not None:
                total, med = known, known if math.isfinite(known) else None
                report["strategies"].append({"strategy": strategy.describe(), "time_s": med, "from_db": True,
                                             "score_s": total, "verdict": "from the tuning database",
                                             "kernels": kernels})
            else:
                _verify_module(t, model)
                timing = t.verdict.details.get("timing", {}) if t.verdict.accepted else {}
                med = timing.get("candidate", {}).get("median_s")
                eager = timing.get("eager", {}).get("median_s")
                eager_ref = eager_ref or eager
                total = _steadied(med, eager, eager_ref)
                if t.verdict.accepted or t.verdict.code not in TRANSIENT:
                    db.put_strategy(*key, total, t.verdict.line())
                report["strategies"].append({"strategy": strategy.describe(), "time_s": med, "eager_s": eager,
                                             "score_s": total, "verdict": t.verdict.line(), "kernels": kernels})
            measured.append((strategy, total))
            if math.isfinite(total):
                scored.append((total, t, report["strategies"][-1]))
            if best is None or total < best[0]:
                best = (total, t)
            if not todo and strategies:  # the singles are in: the families that won, together
                both = _together(measured, _default_s(measured))
                if both is not None and both not in [m for m, _ in measured]:
                    todo.append(both)
                else:  # then the best grown by one family at a time, while that helps
                    todo += _grow(measured, families(base), grown)
        if all(row.get("from_db") for _, _, row in scored):  # a rerun: the head-to-head run's choice
            # (one made between these very modules: a choice among modules akg wrote differently is stale)
            chosen = db.get_choice(*_problem_key(base))
            best = next(((chosen[1], t) for _, t, _ in scored if chosen and measured_as(t) == chosen[0]), best)
        elif _past(start, time_limit_s):
            report["head_to_head"] = {"verdict": f"not timed: the --time limit ({time_limit_s:g} s) passed"}
        else:
            best = _head_to_head(scored, model, eager_ref, db, report) or best
    finally:
        if cluster is not None:
            report["workers"] = cluster.workers
            if isinstance(cluster, Cluster):
                cluster.close()
        # this host's (other hosts of a cluster keep theirs in their temporary folder)
        shutil.rmtree(shared_build_dir(shared), ignore_errors=True)
    if best is None or not math.isfinite(best[0]):
        why = "; ".join(f"{r['strategy']}: {r['verdict']}" for r in report["strategies"])
        raise AkgError(f"no tuned {dsl} module for {base.problem.name} passed verification ({why})")
    t = best[1]
    if t.verdict is None:  # the fastest came from the database: its module verified (and timed) once here
        _verify_module(t, model)
        if not t.verdict.accepted:
            raise AkgError(f"the tuning database's fastest {dsl} module for {base.problem.name} "
                           f"({t.strategy.describe()}) fails verification now: {t.verdict.reason}; tune again "
                           "with AKG_CACHE_DIR set to an empty folder")
    t.strategy_s = best[0] if len(report["strategies"]) > 1 else None
    t.source = render(t, t.verdict.details.get("timing"))
    report["strategy"] = t.strategy.describe()
    report["kernels"] = next(r["kernels"] for r in report["strategies"] if r["strategy"] == report["strategy"])
    report["verdict"] = t.verdict.line()
    if out is not None:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text(t.source)
    report["elapsed_s"] = time.perf_counter() - start
    return report


def _problem_key(t: Translation) -> tuple[str, str, str, str]:
    """What the tuning database keys a problem's strategies and choice by: hardware, DSL, source, versions."""
    return hardware_key(t.target), t.dsl, problem_signature(t.problem), versions(get_backend(t.dsl).manifest)


def _steadied(med: float | None, eager: float | None, eager_ref: float | None) -> float:
    """A strategy's module time as if the host ran as it did for the first strategy: scaled by the eager
    time measured in the same run over that of the first. Strategies are timed minutes apart, and a
    shared host's speed drifts between them by more than they differ (2-3x on our 2-core machines);
    each run's eager time drifts with it. inf: not accepted."""
    if med is None:
        return math.inf
    return med * eager_ref / eager if eager and eager_ref else med


def _head_to_head(scored: list[tuple[float, Translation, dict[str, Any]]], target: HardwareModel,
                  eager_ref: float | None, db: TuningDB, report: dict[str, Any]) -> tuple[float, Translation] | None:
    """Every accepted strategy's module timed once more, together, in one run (every contender in turns
    with eager, after its full verification): each strategy was timed in a run of its own, and one run
    that the host disturbed (a slower eager or module alone) can misorder the scores of separate runs. The
    choice follows this run (all of them: a strategy left out would keep a score from another run's
    scale), and the database keeps it as the problem's choice. None: fewer than two contenders, or the run
    failed."""
    top = sorted(scored, key=lambda x: x[0])
    if len(top) < 2:
        return None
    with tempfile.TemporaryDirectory(prefix="akg-tune-") as d:
        paths = []
        for i, (_, t, _) in enumerate(top):
            paths.append(Path(d) / f"{t.problem.stem}_{t.dsl}_{i}.py")
            paths[-1].write_text(render(t))
        v = verify(top[0][1].problem, paths[0], target=target, timing=True, baselines=("eager",),
                   peers={str(i): p for i, p in enumerate(paths) if i}, timing_lock=host_lock(target))
    timing = v.details.get("timing", {}) if v.accepted else {}
    eager = timing.get("eager", {}).get("median_s")
    if not eager:
        report["head_to_head"] = {"verdict": v.line()}
        return None
    times = [timing["candidate"].get("median_s")] + [timing.get("peers", {}).get(str(i), {}).get("median_s")
                                                      for i in range(1, len(top))]
    best: tuple[float, Translation] | None = None
    for med, (_, t, row) in zip(times, top):
        score = _steadied(med, eager, eager_ref)
        row.update(head_to_head_s=med, head_to_head_score_s=score)
        if best is None or score < best[0]:
            best = (score, t)
    assert best is not None
    t = best[1]  # the strategies keep their own runs' scores (a rerun replays the search on them)
    db.put_choice(*_problem_key(t), measured_as(t), best[0])
    report["head_to_head"] = {"eager_s": eager, "contenders": len(top), "verdict": v.line()}
    return best if math.isfinite(best[0]) else None


def _verify_module(t: Translation, target: HardwareModel) -> None:
    """The whole module verified and timed (its verdict set on `t`)."""
    with tempfile.TemporaryDirectory(prefix="akg-tune-") as d:
        final = Path(d) / f"{t.problem.stem}_{t.dsl}.py"
        final.write_text(render(t))
        t.verdict = verify(t.problem, final, target=target, timing=True, baselines=("eager",),
                           timing_lock=host_lock(target))


def _tune_schedules(t: Translation, o: TuneOptions, start: float, db: TuningDB, report: dict[str, Any],
                    cluster: Cluster | LocalPool | None,
                    on_progress: Callable[[str, int, int, float | None, Done | None], None] | None,
                    shared: str) -> list[dict[str, Any]]:
    """Each kernel's schedules measured (candidates of one kernel together: in parallel on Ray), kernels
    in order, each against the best schedules of those before it; `t.schedules` ends with the best.
    Kernels of one structure (`kernel_signature`: an unrolled recurrence's steps) are searched as one:
    each candidate sets all of them, so the module's time moves by all of their share of it."""
    budget, time_limit_s = o.budget, o.time_limit_s
    backend = get_backend(t.dsl)
    ver, hw, dsl = versions(backend.manifest), hardware_key(t.target), t.dsl
    groups = {g.id: g for g in t.plan.groups}
    measure = cluster.run if cluster is not None else _local(t.problem, t.target)
    src = t.problem.read_text()
    problem_sig = problem_signature(t.problem)
    sigs = {k.name: kernel_signature(problem_sig, k) for k in t.program.kernels()}
    alike: dict[str, list[str]] = {}  # signature -> its kernels, in program order
    for name, sig in sigs.items():
        alike.setdefault(sig, []).append(name)
    rows: dict[str, dict[str, Any]] = {}
    # the learned filter's rows so far (each kernel's are committed as it ends: a later strategy reads them)
    filt = LearnedFilter(rows=db.filter_rows(hw, dsl, ver)) if o.learned else None
    for k in t.program.kernels():
        sig = sigs[k.name]
        if alike[sig][0] != k.name:  # searched with the first of its structure
            continue
        space = ranked_space(backend, k, groups.get(k.group), t.target)
        default = t.schedules[k.name]
        cands = ([default] + [s for s in space if s != default])[:budget]
        if len(cands) == 1:  # nothing to choose: the strategy's module verification checks and times it
            rows[k.name] = {"kernel": k.name, "kind": k.kind, "best": dict(default), "best_s": None, "tried": 0}
            continue
        times: dict[int, float] = {}
        works: list[Work] = []
        picked = set(filt.pick(k, cands)) if filt is not None else set(range(len(cands)))
        for i, sched in enumerate(cands):
            if _past(start, time_limit_s):
                report["time_limit_hit"] = True
                break
            known = db.get(hw, dsl, sig, ver, sched)
            if known is None and i not in picked:  # the learned filter's: never compiled
                report["learned"]["not_measured"] += 1
                continue
            if known is None:
                works.append(Work((k.name, i), t.problem.name, src, render(_with(t, alike[sig], sched)),
                                  shared_build=shared))
            else:
                times[i] = known
                report["from_db"] += 1
        tried = len(times) + len(works)
        lost = 0
        where: dict[int, str] = {}  # candidate -> the device that timed it
        for done in _until(measure(works), start, time_limit_s, report):
            i = done.work.key[1]
            if done.verdict is None:  # lost: not committed, so a rerun tries it again
                lost += 1
                report["lost"].append({"kernel": k.name, "schedule": dict(cands[i]), "why": done.lost})
            else:
                v = Verdict(**done.verdict)
                med = v.details.get("timing", {}).get("candidate", {}).get("median_s") if v.accepted else None
                times[i] = med if med is not None else math.inf
                where[i] = done.device
                if v.accepted or v.code not in TRANSIENT:
                    db.put(hw, dsl, sig, ver, cands[i], times[i], v.line())  # committed as it arrives
                report["measured"] += 1
                report["candidates"].append(_candidate(k.name, cands[i], times[i], v, {
                    "host": done.host, "device": done.device, "attempts": done.attempts,
                    "checked_by": done.checked_by}))
            if on_progress is not None:
                on_progress(k.name, len(times) + lost, tried, min(times.values(), default=None), done)
        if not _past(start, time_limit_s):
            times, together = _on_one_device(t, src, alike[sig], cands, times, where, measure,
                                             lambda i, sec, line: db.put(hw, dsl, sig, ver, cands[i], sec, line))
            if together is not None:
                report.setdefault("together", []).append(together)
        if filt is not None:
            db.put_filter_rows(hw, dsl, sig, ver, filt.learn(k, cands, times))
        best = _fastest(times)
        chosen = (cands[best], times[best]) if best is not None and math.isfinite(times[best]) else None
        t.schedules = _with(t, alike[sig], chosen[0] if chosen else default).schedules
        if chosen:
            db.put_kernel_choice(hw, dsl, sig, ver, *chosen)
        rows[k.name] = {"kernel": k.name, "kind": k.kind, "best": dict(t.schedules[k.name]),
                        "best_s": times[best] if best is not None else None, "tried": tried}
    if filt is not None:
        report["learned"]["kernels_by_model"] += filt.by_model
    firsts = {name: alike[sig][0] for name, sig in sigs.items()}
    return [rows[name] if first == name else {**rows[first], "kernel": name, "tried": 0, "same_as": first}
            for name, first in firsts.items()]


def _on_one_device(t: Translation, problem_src: str, kernels: list[str], cands: list[Schedule], times: dict[int, float],
                   where: dict[int, str], measure: Callable[[list[Work]], Iterator[Done]],
                   keep: Callable[[int, float, str], None]) -> tuple[dict[int, float], dict[str, Any] | None]:
    """`times` with the finalists (within SPREAD of the fastest) timed once more, in turns in one run on one
    device, where different devices timed them: their own runs differ by the devices' pace. Each new time
    replaces the old in the database too (`keep`), so a rerun chooses alike. Unchanged where one device
    timed them all, or the run fails. Second: the report's row of that run (None where none ran)."""
    low = min((sec for sec in times.values() if math.isfinite(sec)), default=math.inf)
    fin = sorted(i for i, sec in times.items() if sec <= low * (1 + SPREAD))
    if len(fin) < 2 or len({where.get(i, "") for i in fin}) < 2:
        return times, None
    kernel = kernels[0]
    bodies = [render(_with(t, kernels, cands[i])) for i in fin]
    work = Work((kernel, "together"), t.problem.name, problem_src, bodies[0],
                peers=tuple((str(i), body) for i, body in zip(fin[1:], bodies[1:])))
    done = next(iter(measure([work])), None)
    v = Verdict(**done.verdict) if done is not None and done.verdict is not None else None
    timing = v.details.get("timing", {}) if v is not None and v.accepted else {}
    meds = [timing.get("candidate", {}).get("median_s")] + [timing.get("peers", {}).get(str(i), {}).get("median_s")
                                                         for i in fin[1:]]
    row: dict[str, Any] = {"kernel": kernel, "timed_on": sorted({where[i] for i in fin if i in where})}
    if v is None or not all(meds):
        row["verdict"] = v.line() if v is not None else f"lost: {done.lost if done else 'no result'}"
        return times, row
    assert done is not None
    new = {i: float(sec) for i, sec in zip(fin, meds) if sec}
    row.update(device=done.device, before={str(i): times[i] for i in fin}, after={str(i): new[i] for i in fin})
    for i in fin:
        keep(i, new[i], v.line())
    return {**times, **new}, row


def _fastest(times: dict[int, float]) -> int | None:
    """The earliest candidate in the cost model's ranking among those within TIE of the fastest: medians
    closer than that are one time to the timer (two runs order them either way), so the ranking decides,
    and the choice is the same whichever device or run measured them."""
    if not times:
        return None
    low = min(times.values())
    return min(j for j, s in times.items() if s <= low * (1 + TIE))


def _past(start: float, limit_s: float | None) -> bool:
    return limit_s is not None and time.perf_counter() - start > limit_s


def _until(done: Iterator[Done], start: float, limit_s: float | None, report: dict[str, Any]) -> Iterator[Done]:
    """Results as they arrive until the time limit passes; then the source is closed, so candidates not
    yet started are dropped (those running finish: a limit is overrun by at most one candidate's time)."""
    try:
        for d in done:
            yield d
            if _past(start, limit_s):
                report["time_limit_hit"] = True
                return
    finally:
        close = getattr(done, "close", None)
        if close is not None:
            close()
