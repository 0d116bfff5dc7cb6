"""Runs the benchmark: each problem's solution verified and timed with the baselines, in one
sandboxed run per problem (the same timing code for all of them)."""

from __future__ import annotations

import json
import re
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from akg_agent.backward import translate_backward
from akg_agent.cluster import Cluster, Work
from akg_agent.translate import translate
from akg_agent.verifier import DEFAULT_SEEDS, Target, Verdict, model_of, sol_trusted, verify
from akg_agent.verifier.sandbox import Limits
from akg_agent.verifier.timing import AA_BASELINE, default_trials, host_lock, paired_quartiles
from ir.errors import AkgError

from .admission import MemoryGate, device_capacity, verification_bytes
from .library_retry import library_measured
from .metrics import slower_beyond_noise, summarize
from .provenance import provenance, scrub
from .report import render


@dataclass(frozen=True)
class BenchOptions:
    """How a bench run verifies and times (one value, handed down whole).

    `pure` (with `dsl`): each problem is also translated with every group generated, and that module is timed
    beside the hybrid one (label "pure"). `jobs` > 1 runs that many problems' verifications at once, while their
    estimated memory fits the device (`memory_bytes`, default its free memory); a run times only while no other
    uses the GPU. `ray` ("" a local Ray, else a cluster's address): translations and verifications as Ray tasks,
    timings in one actor per device. `backward`: a training step (forward and backward, the modules in
    training mode) is checked, every gradient against float64's, and timed; with `dsl` each problem is
    translated with `--backward`."""
    trials: int | None = None
    timeout_s: float = 600.0
    dsl: str | None = None
    jobs: int = 1
    memory_bytes: int | None = None
    pure: bool = False
    ray: str | None = None
    backward: bool = False


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


def timed_baselines(baselines: Sequence[str]) -> tuple[str, ...]:
    """The user's baselines and, beside eager, the A/A control (eager's module a second time): each row
    then carries the spread two identical calls show in that run, the noise its speedups are judged by."""
    return tuple(baselines) + ((AA_BASELINE,) if "eager" in baselines else ())


CONFIRM = 3  # a row slower than a baseline beyond noise is timed again with this many times the turns


def confirmed(first: dict[str, Any], again: dict[str, Any]) -> dict[str, Any]:
    """A row flagged slower beyond noise, timed again with `CONFIRM` times the turns: the second timing
    stands (a larger sample, its own A/A control), the first kept beside it: two identical modules can
    read several percent apart in a 10-turn run."""
    if not again.get("correct"):  # the second run failed where the first passed: keep the first, say so
        return dict(first, confirm_error=again.get("reason"))
    keep = ("speedup", "speedup_quartiles", "noise_quartiles", "candidate_ms", "baseline_ms")
    return dict(again, first_pass={k: first[k] for k in keep if k in first})


def bench_one(problem: Path, solution: Path | None, target: Target, baselines: Sequence[str], opts: BenchOptions,
              peers: dict[str, Path] | None = None, timing_lock: str | None = None) -> dict[str, Any]:
    rec: dict[str, Any] = {"problem": problem.stem, "path": str(problem), "correct": False, "speedup": {}}
    if solution is None or not solution.is_file():
        rec["reason"] = "no solution"
        return rec
    rec["solution"] = str(solution)
    t0 = time.perf_counter()
    # each side-by-side solution gets the main candidate's whole verification (every seed, the guards on
    # torch compute, replays and stale memory), untimed; only those it accepts are timed beside it
    refused: dict[str, dict[str, Any]] = {}
    for label, path in (peers or {}).items():
        try:
            pv = verify(problem, path, target=target, limits=Limits(timeout_s=opts.timeout_s), train=opts.backward,
                        backward=opts.backward)
        except AkgError as e:
            refused[label] = {"correct": False, "speedup": {}, "reason": str(e)}
            continue
        if not pv.accepted:
            refused[label] = {"correct": False, "speedup": {}, "reason": pv.reason, "code": pv.code}
    peers = {lb: pt for lb, pt in (peers or {}).items() if lb not in refused}
    try:
        v = verify(problem, solution, target=target, timing=True, baselines=timed_baselines(baselines),
                   trials=opts.trials, limits=Limits(timeout_s=opts.timeout_s), peers=peers or None,
                   timing_lock=timing_lock, train=opts.backward, backward=opts.backward)
    except AkgError as e:
        rec["reason"] = str(e)
        return rec
    rec = record(rec, v, baselines, time.perf_counter() - t0)
    rec.update(strategy_of(solution))
    if refused:
        rec.setdefault("peers", {}).update(refused)
    return rec


_KERNEL = re.compile(r"^#\s+\w+: generated (\w+) kernel \(group (-?\d+)\)")
_LIBRARY = re.compile(r"^#\s+\w+: library call torch (\w+) \(.*group (-?\d+)\)")


def strategy_of(solution: Path) -> dict[str, Any]:
    """What an akg-written module's header says it did: the plan's strategy and, per fusion group, the
    generated kernels and library calls (empty for a module akg did not write)."""
    out: dict[str, Any] = {}
    groups: dict[str, list[str]] = {}
    for line in solution.read_text().splitlines()[:400]:
        if not line.startswith("#"):
            break
        if line.startswith("# strategy: "):
            out["strategy"] = line[len("# strategy: "):]
        m = _KERNEL.match(line) or _LIBRARY.match(line)
        if m:
            what = f"generated {m.group(1)}" if m.re is _KERNEL else f"library {m.group(1)}"
            groups.setdefault(m.group(2), []).append(what)
    if groups:
        out["groups"] = {g: ", ".join(dict.fromkeys(v)) for g, v in groups.items()}
    return out


def record(rec: dict[str, Any], v: Verdict, baselines: Sequence[str], verify_s: float) -> dict[str, Any]:
    """A problem's row from its verdict: correctness, times, speedups, fraction of speed-of-light, peers."""
    rec.update(correct=v.accepted, code=v.code, reason=v.reason, verify_s=verify_s,
               device=v.details.get("device"), on_target=v.details.get("on_target"),
               phase_s=v.details.get("phase_s"))
    if v.details.get("timed_card"):  # another card than the target's timed it (its bound, its speeds)
        rec["timed_card"] = v.details["timed_card"]
    t = v.details.get("timing") or {}
    cand = t.get("candidate", {}).get("median_s")
    if v.details.get("guard_us") is not None:  # the module's input check, per call, on the host
        rec["guard_us"] = v.details["guard_us"]
    if cand:
        rec["candidate_ms"] = cand * 1e3
        for b in baselines:
            base = t.get(b, {})
            if base.get("median_s"):
                rec.setdefault("baseline_ms", {})[b] = base["median_s"] * 1e3
                rec["speedup"][b] = base["median_s"] / cand
                q = paired_quartiles(base.get("trials_s", ()), t["candidate"].get("trials_s", ()))
                if q:
                    rec.setdefault("speedup_quartiles", {})[b] = list(q)
            if base.get("compile_s") is not None:
                rec.setdefault("compile_s", {})[b] = base["compile_s"]
            if base.get("error"):
                rec.setdefault("baseline_errors", {})[b] = base["error"]
        noise = paired_quartiles(t.get("eager", {}).get("trials_s", ()), t.get(AA_BASELINE, {}).get("trials_s", ()))
        if noise:  # eager against itself in this run: how far apart two identical calls' turns fall here
            rec["noise_quartiles"] = list(noise)
        sol = v.details.get("sol_s")  # the verifier's bound (after the algebraic rewrites)
        if sol:
            rec["sol_ms"], rec["sol_fraction"] = sol * 1e3, sol / cand
        elif v.details.get("on_target") and not v.details.get("timed_card"):
            rec["sol_error"] = "no speed-of-light: akg could not lift the reference"
        rec["peers"] = {}
        for label, pt in (t.get("peers") or {}).items():  # timed in the same run, on the same inputs
            pr: dict[str, Any] = {"correct": bool(pt.get("correct")), "speedup": {}}
            if pt.get("error"):
                pr["reason"] = pt["error"]
            elif pt.get("median_s"):
                pr["candidate_ms"] = pt["median_s"] * 1e3
                pr["speedup"] = {b: ms / pr["candidate_ms"] for b, ms in rec.get("baseline_ms", {}).items()}
                qs = {b: paired_quartiles(t[b].get("trials_s", ()), pt.get("trials_s", ())) for b in pr["speedup"]}
                if any(qs.values()):
                    pr["speedup_quartiles"] = {b: list(q) for b, q in qs.items() if q}
                if rec.get("sol_ms"):
                    pr["sol_fraction"] = rec["sol_ms"] / pr["candidate_ms"]
                if noise:
                    pr["noise_quartiles"] = list(noise)
            rec["peers"][label] = pr
    return rec


def sol_basis(target: Target) -> str:
    """What the fractions of speed-of-light rest on: the target's model, measured or estimated."""
    m = model_of(target)
    if m.calibrated_from:
        return f"{m.description}, {m.calibrated_from}"
    if not sol_trusted(m):  # the bandwidth only estimated
        return (f"{m.description}, estimates (nominal clock, guessed bandwidth; `akg hw calibrate --target "
                f"{m.name}` measures them)")
    return f"{m.description}, its data file"


def parse_solutions(spec: str) -> dict[str, Path]:
    """`DIR` or `label=DIR,label=DIR,...` (one folder of solutions per DSL, timed side by side)."""
    if "=" not in spec:
        return {"": Path(spec)}
    out: dict[str, Path] = {}
    for part in spec.split(","):
        label, _, d = part.partition("=")
        if not label or not d:
            raise AkgError(f"bad --solutions entry {part!r}: write label=DIR, e.g. <dsl>=out/<dsl>")
        out[label] = Path(d)
    return out


def flatten(records: Sequence[dict[str, Any]], labels: Sequence[str]) -> dict[str, list[dict[str, Any]]]:
    """Per-label records: the first label's are the verified main candidates; the others are their peers
    (baselines shared, so each row's speedups come from one run)."""
    by: dict[str, list[dict[str, Any]]] = {lb: [] for lb in labels}
    for r in records:
        main = r.get("main_label", labels[0])
        by.setdefault(main, []).append(r)
        for lb, pr in r.get("peers", {}).items():
            by.setdefault(lb, []).append(dict(pr, problem=r["problem"]))
        for lb in labels:  # a label with no solution for this problem counts as not correct
            if lb != main and lb not in r.get("peers", {}):
                by[lb].append({"problem": r["problem"], "correct": False, "speedup": {}, "reason": "no solution"})
    return by


def _translate_one(p: Path, dsl: str, target: Target, sol_dir: Path, pure: bool = False, backward: bool = False
                   ) -> None:
    """Written, not verified: the bench's own run verifies and times it once (at real sizes a
    verification is most of a problem's time). `backward`: both passes, each graph verified as it is
    written (`akg translate --backward`)."""
    try:
        if backward:
            translate_backward(p, dsl, target if isinstance(target, str) else target.name, sol_dir / p.name)
        else:
            translate(p, dsl, target, sol_dir / p.name, verify_result=False, pure=pure)
    except AkgError as e:
        (sol_dir / f"{p.stem}.error.txt").write_text(str(e))


def _translate_all(problems: list[Path], dsl: str, target: Target, sol_dir: Path, opts: BenchOptions,
                   pure: bool = False) -> None:
    """Translate each problem with the rules engine; a failure leaves that problem without a
    solution (reported as such), never stops the run. Each verification is its own subprocess, so
    threads are enough to overlap them."""
    sol_dir.mkdir(parents=True, exist_ok=True)
    with ThreadPoolExecutor(max(1, opts.jobs)) as pool:
        list(pool.map(lambda p: _translate_one(p, dsl, target, sol_dir, pure, opts.backward), problems))


def translate_text(name: str, src: str, dsl: str, target: str, pure: bool) -> tuple[str, str]:
    """A Ray task: the problem's source in, (the module's source, "") or ("", the one-line error) out."""
    with tempfile.TemporaryDirectory(prefix="akg-bench-") as d:
        prob, out = Path(d) / name, Path(d) / "out" / name
        prob.write_text(src)
        try:
            translate(prob, dsl, target, out, verify_result=False, pure=pure)
        except AkgError as e:
            return "", str(e)
        return out.read_text(), ""


def _translate_on(cluster: Cluster, problems: list[Path], dsl: str, target: str, sol_dir: Path, pure: bool) -> None:
    """_translate_all's work as Ray tasks: the sources travel, the modules come back as text."""
    sol_dir.mkdir(parents=True, exist_ok=True)
    items = [(p.name, p.read_text(), dsl, target, pure) for p in problems]
    for i, res, lost in cluster.map(translate_text, items):
        src, err = res if res is not None else ("", f"not translated: {lost}")
        p = problems[i]
        if src:
            (sol_dir / p.name).write_text(src)
        else:
            (sol_dir / f"{p.stem}.error.txt").write_text(err)


def _bench_on(cluster: Cluster, problems: list[Path], dirs: dict[str, Path], target: str, baselines: Sequence[str],
              opts: BenchOptions) -> Iterator[dict[str, Any]]:
    """bench_one for every problem through the cluster: verified on CPU workers (a CPU target) or on the
    device, timed by the device's actor; each row says which host and device timed it."""
    works: list[Work] = []
    for p in problems:
        have = [lb for lb in dirs if (dirs[lb] / p.name).is_file()]
        if not have:
            yield {"problem": p.stem, "path": str(p), "correct": False, "speedup": {}, "main_label": list(dirs)[0],
                   "reason": "no solution"}
            continue
        works.append(Work((str(p), have[0]), p.name, p.read_text(), (dirs[have[0]] / p.name).read_text(), DEFAULT_SEEDS,
                          timed_baselines(baselines), opts.timeout_s, sol_check=True, trials=opts.trials,
                          peers=tuple((lb, (dirs[lb] / p.name).read_text()) for lb in have[1:])))
    t0 = time.perf_counter()
    for done in cluster.run(works):
        p, main = Path(done.work.key[0]), done.work.key[1]
        rec = {"problem": p.stem, "path": str(p), "correct": False, "speedup": {}, "main_label": main,
               "solution": str(dirs[main] / p.name), "host": done.host, "timed_on": done.device,
               "attempts": done.attempts}
        if done.verdict is None:
            yield dict(rec, reason=f"lost: {done.lost}")
        else:
            yield record(rec, Verdict(**done.verdict), baselines, time.perf_counter() - t0)


def run_bench(paths: Sequence[str], target: str, baselines: Sequence[str], solutions: str | None, out_dir: str,
              opts: BenchOptions = BenchOptions(),
              on_record: Callable[[dict[str, Any], int, int], None] | None = None) -> dict[str, Any]:
    """Each problem's solution (from `solutions`, or translated with `opts.dsl`) verified and timed with the
    baselines; results.json and report.html in `out_dir` (`BenchOptions` says how)."""
    problems = collect(paths)
    if opts.backward and (opts.ray is not None or opts.pure):
        raise AkgError("--backward runs on this host and times the hybrid translation only: drop --ray and --pure")
    cluster = Cluster(opts.ray or None, target) if opts.ray is not None else None
    try:
        return _run(problems, target, baselines, solutions, out_dir, opts, on_record, cluster)
    finally:
        if cluster is not None:
            cluster.close()


def _run(problems: list[Path], target: str, baselines: Sequence[str], solutions: str | None, out_dir: str,
         opts: BenchOptions, on_record: Callable[[dict[str, Any], int, int], None] | None,
         cluster: Cluster | None) -> dict[str, Any]:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    model = model_of(target)  # loaded once for the run: each translation and verification gets the value
    dsl, jobs, pure = opts.dsl, opts.jobs, opts.pure
    if solutions is None:
        if dsl is None:
            raise AkgError("nothing to benchmark: pass --solutions DIR, or --dsl D to translate each problem")
        dirs = {"hybrid" if pure else "": out / "solutions"}
        if pure:
            dirs["pure"] = out / "solutions-pure"
        for label, d in dirs.items():
            if cluster is not None:
                _translate_on(cluster, problems, dsl, target, d, label == "pure")
            else:
                _translate_all(problems, dsl, model, d, opts, pure=label == "pure")
    else:
        dirs = parse_solutions(solutions)
    for d in dirs.values():
        if not d.is_dir():
            raise AkgError(f"no such solutions folder: {d}")
    labels = list(dirs)
    lock = host_lock(model)  # also keeps another akg run on this host (a tune, a second bench) off our timings
    kind = model.kind
    gate = MemoryGate(opts.memory_bytes if opts.memory_bytes is not None else device_capacity(kind))
    again = replace(opts, trials=CONFIRM * (opts.trials or default_trials(kind == "gpu")))  # a flagged row's turns

    def one(p: Path) -> dict[str, Any]:
        have = [lb for lb in labels if (dirs[lb] / p.name).is_file()]
        main = have[0] if have else labels[0]
        peers = {lb: dirs[lb] / p.name for lb in have[1:]}
        need = verification_bytes(p) if jobs > 1 else 0
        with gate.hold(need):  # several at once only while their memory fits the device
            rec = bench_one(p, dirs[main] / p.name, model, baselines, opts, peers or None, lock)
            if any(slower_beyond_noise([rec], b) for b in baselines):  # a larger sample decides (`confirmed`)
                rec = confirmed(rec, bench_one(p, dirs[main] / p.name, model, baselines, again, peers or None, lock))
            if solutions is None and dsl and not pure and not opts.backward and "eager" in baselines:
                # timed as the flagged row was confirmed: the larger sample
                rec = library_measured(p, dsl, model, dirs[main] / p.name, rec,
                                       lambda path: bench_one(p, path, model, baselines, again, None, lock))
        rec["main_label"] = main
        if need:
            rec["admitted_bytes"] = need
        return rec

    records: list[dict[str, Any]] = []
    with ThreadPoolExecutor(max(1, jobs)) as pool:
        rows = (_bench_on(cluster, problems, dirs, target, baselines, opts) if cluster is not None
                else (f.result() for f in as_completed([pool.submit(one, p) for p in problems])))
        for row in rows:
            records.append(row)
            # write as we go: a killed run keeps every finished problem
            (out / "results.partial.json").write_text(json.dumps(records, indent=2, default=str))
            if on_record is not None:
                on_record(records[-1], len(records), len(problems))
    order = {str(p): i for i, p in enumerate(problems)}
    records.sort(key=lambda r: order[r["path"]])
    meta = {"target": target, "dsl": dsl or "any", "baselines": list(baselines), "backward": opts.backward,
            "solutions": scrub(solutions or ",".join(f"{lb}={d}" if lb else str(d) for lb, d in dirs.items())),
            "date": time.strftime("%Y-%m-%d %H:%M:%S"), "jobs": jobs, "sol_model": sol_basis(model),
            "ray": None if cluster is None else {"workers": cluster.workers, "timers": len(cluster.timers)},
            **provenance()}
    summary = summarize(records, baselines)
    doc = {"meta": meta, "summary": summary, "records": records}
    if len(labels) > 1:
        doc["by_label"] = {lb: {"summary": summarize(rs, baselines), "records": rs}
                           for lb, rs in flatten(records, labels).items()}
        summary = doc["summary"] = doc["by_label"][labels[0]]["summary"]
    (out / "results.json").write_text(json.dumps(doc, indent=2, default=str))
    (out / "results.partial.json").unlink(missing_ok=True)
    (out / "report.html").write_text(render(records, summary, meta))
    return doc
