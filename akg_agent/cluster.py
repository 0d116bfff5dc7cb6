"""Tuning and benchmarking on Ray (`akg tune --ray [ADDRESS]`, `akg bench --ray [ADDRESS]`).

What goes over the network is text: the problem's source, a candidate module's source, and verdicts
with their timings back; tensors never leave the worker that makes them. Compile-and-verify runs as
Ray tasks on CPUs anywhere in the cluster (for a CPU target; a GPU target's candidates are verified
where they are timed, on the device). Timing runs in one actor per device: one per GPU (Ray's GPU
resource), or one per host for a CPU target, so no two timings share a device. On a host, every
verifier run holds the host's timing lock shared and a timed loop holds it exclusively, so a timing
never overlaps a compile there either. A task or actor that dies is retried elsewhere up to
`ATTEMPTS` times, then its candidate is reported lost, never dropped; the driver commits each result
to the tuning database as it arrives (a killed driver loses nothing committed)."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import shutil
import socket
import tempfile
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hardware_models.spec import load_target
from ir.errors import AkgError

from .verifier import verify
from .verifier.sandbox import Limits
from .verifier.timing import host_lock

ATTEMPTS = 3  # tries per candidate before it is reported lost


@dataclass(frozen=True)
class Work:
    """One candidate: a module's source to verify (and time) against a problem's source."""

    key: Any  # the caller's handle (kernel and candidate index)
    problem_name: str
    problem_src: str
    source: str
    seeds: tuple[int, ...] = (0, 1)
    baselines: tuple[str, ...] = ()
    timeout_s: float = 300.0
    sol_check: bool = False  # judge the timing against the speed-of-light (bench), not only compare (tune)
    trials: int | None = None
    peers: tuple[tuple[str, str], ...] = ()  # (label, source) of modules timed in the same run (bench)
    # compiled code shared by the candidates of one search, all rendered by akg (a tune's): a kernel
    # one candidate compiled, the next loads. Empty for a module from elsewhere (an LLM's), which
    # could otherwise plant code that another candidate runs
    shared_build: str = ""


@dataclass
class Done:
    work: Work
    verdict: dict[str, Any] | None  # Verdict.to_json(); None when lost
    host: str = ""
    device: str = ""
    attempts: int = 1
    checked_by: str = ""  # host:pid of the task that compiled and verified it, where that was a task
    lost: str = ""  # why it was never measured (every attempt's worker died)
    failures: list[str] = field(default_factory=list)


def _files(w: Work, d: Path) -> tuple[Path, Path, dict[str, Path]]:
    prob, cand = d / w.problem_name, d / "candidate.py"
    prob.write_text(w.problem_src)
    cand.write_text(w.source)
    peers = {label: d / f"peer_{i}.py" for i, (label, _) in enumerate(w.peers)}
    for (label, src) in w.peers:
        peers[label].write_text(src)
    return prob, cand, peers


def build_dir(w: Work) -> Path:
    """This candidate's compiled code on this host, kept from its check to its timing: its own (one
    candidate's run cannot plant code for another), or its search's where akg rendered it all."""
    d = shared_build_dir(w.shared_build) if w.shared_build else _builds() / _digest(w.source)
    d.mkdir(parents=True, exist_ok=True)
    return d


def shared_build_dir(name: str) -> Path:
    """The build folder a search's candidates share on this host (not made here)."""
    return _builds() / f"shared-{_digest(name)}"


def _builds() -> Path:
    return Path(tempfile.gettempdir()) / "akg-builds"


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def _run(w: Work, target: str, timing: bool) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="akg-ray-") as d:
        prob, cand, peers = _files(w, Path(d))
        build = build_dir(w)
        v = None
        try:
            v = verify(prob, cand, target=target, seeds=w.seeds, timing=timing, baselines=w.baselines,
                       trials=w.trials, limits=Limits(timeout_s=w.timeout_s), sol_check=w.sol_check,
                       timing_lock=host_lock(target), peers=peers if timing else None, build_cache=build)
        except AkgError as e:
            return {"accepted": False, "code": "verifier_error", "reason": str(e), "details": {}}
        finally:
            # the candidate's last run on this host (a search's shared code outlives it: the next loads it)
            if not w.shared_build and (timing or v is None or not v.accepted):
                shutil.rmtree(build, ignore_errors=True)
    out = v.to_json()
    out["details"].pop("output", None)  # the worker's console, kept on the worker
    return out


def check(w: Work, target: str) -> tuple[dict[str, Any], str]:
    """A Ray task: compile and verify, no timing (CPU targets). Returns the verdict and the worker."""
    return _run(w, target, timing=False), f"{socket.gethostname()}:{os.getpid()}"


class Timer:
    """A Ray actor owning one device: verifies (again, on the device) and times one candidate at a time."""

    def __init__(self, target: str, omp_threads: str | None) -> None:
        self.target = target
        self.host = socket.gethostname()
        # Ray sets OMP_NUM_THREADS to an actor's CPU count (1 for this one), which the sandbox would pass
        # on to every timed module: the timing keeps the driver's setting instead
        if omp_threads is None:
            os.environ.pop("OMP_NUM_THREADS", None)
        else:
            os.environ["OMP_NUM_THREADS"] = omp_threads
        if load_target(target).kind == "cpu" and hasattr(os, "sched_setaffinity"):
            os.sched_setaffinity(0, range(os.cpu_count() or 1))  # the host's cores, whatever Ray gave the worker
        gpus = os.environ.get("CUDA_VISIBLE_DEVICES", "")
        self.device = f"{self.host}:cuda:{gpus}" if gpus else f"{self.host}:cpu"

    def time(self, w: Work) -> tuple[dict[str, Any], str, str]:
        return _run(w, self.target, timing=True), self.host, self.device


class LocalPool:
    """The same split on this host alone, without Ray (`akg tune --jobs N`): candidates compiled and
    verified N at a time (threads, each verification its own sandboxed process), timed one at a time
    (the host's timing lock keeps every compile out of a timed loop)."""

    def __init__(self, target: str, jobs: int) -> None:
        self.target, self.workers = target, jobs
        self.device = f"{socket.gethostname()}:{'cpu' if load_target(target).kind == 'cpu' else 'cuda'}"

    def run(self, works: Sequence[Work]) -> Iterator[Done]:
        host, me = socket.gethostname(), f"{socket.gethostname()}:{os.getpid()}"
        with ThreadPoolExecutor(self.workers) as checks, ThreadPoolExecutor(1) as timer:
            checking = {checks.submit(_run, w, self.target, False): w for w in works}
            timing: dict[Future, Work] = {}
            try:
                for f in as_completed(checking):
                    w, verdict = checking[f], f.result()
                    if verdict["accepted"]:
                        timing[timer.submit(_run, dataclasses.replace(w, seeds=w.seeds[:1]), self.target, True)] = w
                    else:
                        yield Done(w, verdict, host=host, checked_by=me)
                for f in as_completed(timing):
                    yield Done(timing[f], f.result(), host=host, device=self.device, checked_by=me)
            finally:  # closed early (a time limit): what has not started is dropped, not waited for
                for f in [*checking, *timing]:
                    f.cancel()


class Cluster:
    """A connection to Ray (a local instance started for the run when `address` is empty)."""

    def __init__(self, address: str | None, target: str, num_cpus: int | None = None) -> None:
        try:
            import ray
        except ImportError as e:
            raise AkgError("--ray needs the ray package: pip install 'ray==2.60.0'") from e
        self.ray, self.target = ray, target
        self.gpu = load_target(target).kind == "gpu"
        self.started = not ray.is_initialized()
        try:
            if self.started:
                kw: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, "configure_logging": False}
                if address:
                    ray.init(address=address, **kw)
                else:
                    ray.init(num_cpus=num_cpus, **kw)
        except (ConnectionError, RuntimeError, ValueError) as e:
            raise AkgError(f"cannot reach the Ray cluster at {address!r}: {str(e).splitlines()[0]} "
                           "(start one with `ray start --head`, or drop the address for a local one)") from e
        nodes = [n for n in ray.nodes() if n.get("Alive")]
        gpus = int(ray.cluster_resources().get("GPU", 0))
        if self.gpu and not gpus:
            self.close()
            raise AkgError(f"the Ray cluster has no GPU for target {target} ({len(nodes)} node(s), CPUs only): "
                           "start workers on GPU hosts (`ray start --num-gpus N`), or tune a CPU target")
        timer, omp = ray.remote(Timer), os.environ.get("OMP_NUM_THREADS")
        if self.gpu:
            self.timers = [timer.options(num_gpus=1, num_cpus=0, max_restarts=ATTEMPTS).remote(target, omp)
                           for _ in range(gpus)]
        else:
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

            self.timers = [timer.options(num_cpus=0, max_restarts=ATTEMPTS, scheduling_strategy=(
                NodeAffinitySchedulingStrategy(n["NodeID"], soft=False))).remote(target, omp) for n in nodes]
        self.check = ray.remote(check).options(num_cpus=1, max_retries=0)
        self.workers = int(ray.cluster_resources().get("CPU", 1))

    def map(self, fn: Callable[..., Any], items: Sequence[tuple[Any, ...]]) -> Iterator[tuple[int, Any, str]]:
        """`fn(*item)` for each item as a Ray task on one CPU, yielded as (index, result, "") when done, or
        (index, None, why) once its worker has died ATTEMPTS times; an exception `fn` raises is re-raised."""
        task = self.ray.remote(fn).options(num_cpus=1, max_retries=0)
        pending = {task.remote(*it): (i, 1) for i, it in enumerate(items)}
        while pending:
            [ref], _ = self.ray.wait(list(pending), num_returns=1)
            i, attempt = pending.pop(ref)
            try:
                yield i, self.ray.get(ref), ""
            except self.ray.exceptions.RayTaskError as e:
                raise e.as_instanceof_cause() from None
            except self.ray.exceptions.RayError as e:
                if attempt < ATTEMPTS:
                    pending[task.remote(*items[i])] = (i, attempt + 1)
                else:
                    yield i, None, f"its worker died {attempt} times ({type(e).__name__})"

    def close(self) -> None:
        if self.started and self.ray.is_initialized():
            self.ray.shutdown()

    def run(self, works: Sequence[Work]) -> Iterator[Done]:
        """Each work verified (CPU tasks, for a CPU target) then timed (device actors), yielded as it
        finishes; a dead worker's work is resubmitted, up to ATTEMPTS tries."""
        ray = self.ray
        # ref -> (stage, work, attempt, failures, timer index or -1)
        pending: dict[Any, tuple[str, Work, int, list[str], int]] = {}
        checked: dict[Any, str] = {}  # work key -> the check task's worker
        load = [0] * len(self.timers)

        def to_timer(w: Work, attempt: int, failures: list[str]) -> None:
            i = min(range(len(self.timers)), key=lambda j: load[j])
            load[i] += 1
            pending[self.timers[i].time.remote(w)] = ("time", w, attempt, failures, i)

        def submit(stage: str, w: Work, attempt: int, failures: list[str]) -> None:
            if stage == "check":
                pending[self.check.remote(w, self.target)] = ("check", w, attempt, failures, -1)
            else:
                to_timer(w, attempt, failures)

        first = "time" if self.gpu else "check"
        for w in works:
            submit(first, w, 1, [])
        try:
            while pending:
                [ref], _ = ray.wait(list(pending), num_returns=1)
                stage, w, attempt, failures, timer = pending.pop(ref)
                if timer >= 0:
                    load[timer] -= 1
                try:
                    res = ray.get(ref)
                except ray.exceptions.RayTaskError as e:  # the code raised: a verifier failure, not a lost worker
                    yield Done(w, {"accepted": False, "code": "verifier_error", "reason": str(e).splitlines()[-1],
                                   "details": {}}, attempts=attempt, failures=failures)
                    continue
                except ray.exceptions.RayError as e:  # the worker, actor or node died
                    failures = [*failures, f"{stage}: {type(e).__name__}"]
                    if attempt < ATTEMPTS:
                        submit(stage, w, attempt + 1, failures)
                    else:
                        yield Done(w, None, attempts=attempt, failures=failures,
                                   lost=f"its {stage} worker died {attempt} times ({failures[-1]})")
                    continue
                if stage == "check":
                    verdict, checked[w.key] = res
                    if verdict["accepted"]:  # verified on every seed: the device's run checks one more time
                        to_timer(dataclasses.replace(w, seeds=w.seeds[:1]), attempt, failures)
                    else:
                        yield Done(w, verdict, host=checked[w.key].split(":")[0], attempts=attempt,
                                   checked_by=checked[w.key], failures=failures)
                    continue
                verdict, host, device = res
                yield Done(w, verdict, host=host, device=device, attempts=attempt, checked_by=checked.get(w.key, ""),
                           failures=failures)
        finally:  # closed early (a time limit): tasks not yet finished are cancelled
            for ref in pending:
                try:
                    ray.cancel(ref)
                except Exception:  # noqa: BLE001 - an actor task that has started runs to its end
                    pass

