"""Writing a dynamo graph's module: in this process, or in a background process while the graph runs as torch.

`write_entry` writes and verifies one graph's module into its cache entry (`dynamo.CompiledGraph`). With the
backend's option `first_call="eager"` it runs in a translator process instead (`Translator`; a `Pool` of
them per process, one per four cores): the caller's calls run the captured graph as torch meanwhile, and the
module takes over at the first call after its entry is complete. A separate process rather than a thread:
the lift draws random numbers from torch's generator (the caller's dropout must draw what eager draws), and
lifting and planning are Python work that would hold the caller's interpreter lock.

The protocol is one JSON object per line: a job {"id", "problem", "entry", "dsl", "target", "how"} on the
translator's stdin, its answer {"id", "error", "notes"} on the descriptor it was handed, the translator's
stdout and stderr going to a log in akg's cache directory (what translate prints must not break a line).
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import json
import os
import shutil
import subprocess
import sys
import threading
import traceback
from concurrent.futures import Future
from pathlib import Path
from typing import IO, Any

from hardware_models.spec import cache_dir
from ir.errors import AkgError

from .translate import translate
from .verifier import prestart_for
from .verifier.candidate import first_line


def write_entry(problem: Path, entry: Path, dsl: str, target: str, how: dict[str, Any]) -> list[str]:
    """Translate `problem` (a graph's problem file, its graph.pt beside it) and write the cache entry; the
    notes to add to the graph's report. Raises AkgError where no module can be written."""
    notes = []
    how = dict(how, build_cache=Path(how["build_cache"]) if how.get("build_cache") else None,
               seeds=tuple(how["seeds"]))  # a job's options came through JSON
    try:
        t = translate(problem, dsl, target, **how)
    except AkgError as e:  # a GEMM the backend cannot write with its epilogue: the library's GEMM
        if "--library gemm" not in str(e):
            raise
        t = translate(problem, dsl, target, library=("gemm",), **how)
        notes.append(f"GEMMs left to the library: {first_line(e)}")
    # the problem and its graph are kept beside the module: the module's state comes from them
    entry.mkdir(parents=True, exist_ok=True)
    (entry / "graph.pt").write_bytes((problem.parent / "graph.pt").read_bytes())
    (entry / "graph.py").write_text(problem.read_text())
    (entry / "kept.txt").write_text("\n".join(t.graph.meta.get("opaque", [])))
    (entry / "module.py").write_text(t.source)  # last: its presence marks a complete entry
    return notes


class Translator:
    """The background translator process and the jobs it was given (each a Future of (error, notes))."""

    def __init__(self, log: Path) -> None:
        log.parent.mkdir(parents=True, exist_ok=True)
        read, write = os.pipe()
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(Path(__file__).resolve().parents[1]),
                                                            os.environ.get("PYTHONPATH", "")]))
        with open(log, "ab") as out:
            self.proc = subprocess.Popen([sys.executable, "-m", "akg_agent.dynamo_background", str(write)],
                                         stdin=subprocess.PIPE, stdout=out, stderr=subprocess.STDOUT,
                                         pass_fds=(write,), env=env)
        os.close(write)
        self.log = log
        self.answers: IO[str] = os.fdopen(read, "r")
        self.jobs: dict[int, Future[tuple[str, list[str]]]] = {}
        self.ids = itertools.count()
        self.lock = threading.Lock()
        threading.Thread(target=self._pump, name="akg-translator", daemon=True).start()

    def submit(self, job: dict[str, Any]) -> Future[tuple[str, list[str]]]:
        done: Future[tuple[str, list[str]]] = Future()
        with self.lock:
            if self.proc.poll() is not None:
                done.set_result((f"akg's background translator exited (status {self.proc.returncode}; "
                                 f"its log: {self.log})", []))
                return done
            n = next(self.ids)
            self.jobs[n] = done
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.write((json.dumps({**job, "id": n}) + "\n").encode())
                self.proc.stdin.flush()
            except OSError as e:  # it died since: the graph stays torch, the caller's call goes on
                self.jobs.pop(n)
                done.set_result((f"akg's background translator could not take the job ({e}; its log: "
                                 f"{self.log})", []))
        return done

    def prestart(self, target: str, dsl: str) -> None:
        """The translator's verifier fork server for `target` started now (its imports overlap the graph's)."""
        with self.lock, contextlib.suppress(OSError):  # a translator that died answers its next job
            if self.proc.poll() is None and self.proc.stdin is not None:
                self.proc.stdin.write((json.dumps({"prestart": [target, dsl]}) + "\n").encode())
                self.proc.stdin.flush()

    def _pump(self) -> None:
        with self.answers:
            for line in self.answers:
                answer = json.loads(line)
                with self.lock:
                    done = self.jobs.pop(answer["id"], None)
                if done is not None:
                    done.set_result((answer["error"], answer["notes"]))
        self.proc.wait()
        with self.lock:  # the process ended: what it was still writing will not come
            left, self.jobs = self.jobs, {}
        for done in left.values():
            done.set_result((f"akg's background translator exited (status {self.proc.returncode}) before "
                             f"the module was written; its log: {self.log}", []))

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        if self.proc.stdin is not None:
            self.proc.stdin.close()


class Pool:
    """Translators for one environment: up to `size` processes, each job to the least busy (a model of eight
    graphs need not write them one after another on a host of many cores), one job per cache entry (two graphs
    of the same code and sizes, Mixtral's experts, are written once)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.members: list[Translator] = []
        self.entries: dict[str, Future[tuple[str, list[str]]]] = {}
        self.lock = threading.Lock()

    def _member(self) -> Translator:
        live = [t for t in self.members if t.proc.poll() is None]
        idle = min(live, key=lambda t: len(t.jobs), default=None)
        if idle is None or (idle.jobs and len(live) < self.size):
            idle = Translator(cache_dir() / "logs" / f"translator-{os.getpid()}-{next(_logs)}.log")
            atexit.register(idle.close)
            self.members = [*live, idle]
        return idle

    def submit(self, job: dict[str, Any]) -> Future[tuple[str, list[str]]]:
        with self.lock:
            same = self.entries.get(job["entry"])
            if same is not None and not same.done():
                return same
            done = self.entries[job["entry"]] = self._member().submit(job)
            return done

    def prestart(self, target: str, dsl: str) -> None:
        with self.lock:
            self._member().prestart(target, dsl)

    def close(self) -> None:
        with self.lock:
            for t in self.members:
                t.close()


_pools: dict[frozenset[tuple[str, str]], Pool] = {}
_started = threading.Lock()
_logs = itertools.count()


def pool_size() -> int:
    """Translators at once: one per four cores (each verifies in a fork server of its own; a 2-core host keeps
    one, whose compiles already share the cores with the caller's calls), at most four."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    return max(1, min(4, cores // 4))


def translator() -> Pool:
    """This process's translators for its environment as it is now (the cache directory, TRITON_INTERPRET and
    the visible devices are read from it), each started when a job needs it."""
    env = frozenset((k, v) for k, v in os.environ.items() if not k.startswith("PYTEST_"))  # pytest's per test
    with _started:
        if env not in _pools:
            _pools[env] = Pool(pool_size())
        return _pools[env]


def staged(problem: Path) -> None:
    """The staging folder of a job's problem, removed once its answer came."""
    shutil.rmtree(problem.parent, ignore_errors=True)


def _serve(answer_fd: int) -> None:
    answers = os.fdopen(answer_fd, "w")
    for line in sys.stdin:
        job = json.loads(line)
        if "prestart" in job:
            target, dsl = job["prestart"]
            prestart_for(target, dsl=dsl)
            continue
        error, notes = "", []
        if (Path(job["entry"]) / "module.py").is_file():  # written meanwhile (another process, an earlier job)
            answers.write(json.dumps({"id": job["id"], "error": "", "notes": []}) + "\n")
            answers.flush()
            continue
        try:
            notes = write_entry(Path(job["problem"]), Path(job["entry"]), job["dsl"], job["target"], job["how"])
        except AkgError as e:
            error = str(e)
        except Exception as e:  # noqa: BLE001 - any failure is the graph's answer: it then stays torch
            error = f"{type(e).__name__}: {first_line(e)}"
            traceback.print_exc()  # into the translator's log
        answers.write(json.dumps({"id": job["id"], "error": error, "notes": notes}) + "\n")
        answers.flush()


if __name__ == "__main__":
    _serve(int(sys.argv[1]))
