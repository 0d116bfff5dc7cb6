"""Runs a verifier job in a separate process: time limit, memory limit, its own process group,
no network, and a working directory of its own. A hang, a segfault or an illegal memory access in
a candidate becomes a rejection, never a crash of akg.

The process is forked from a server that has already imported torch and the worker (`zygote`), so a
job does not pay torch's import (about 1.5 s here) each time; the server never initialises CUDA, and
the child takes the job's environment, limits and directory before the candidate is read. A job
wrapped by a profiler, or `AKG_VERIFIER_FORK=0`, starts a fresh interpreter instead."""

from __future__ import annotations

import atexit
import ctypes
import json
import os
import re
import resource
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dsl_backends import import_env, preload_for_source, sandbox_env
from hardware_models.spec import cache_dir

from .timing import LOCK_WAIT_FILE

CLONE_NEWNET = 0x40000000


BASE_MEMORY = 8 * 1024**3  # a job's address space beside its problem: torch's own mappings, a small problem


@dataclass
class Limits:
    timeout_s: float = 300.0
    memory_bytes: int | None = BASE_MEMORY  # address-space cap; not applied to GPU jobs (CUDA maps a lot)


def host_memory() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) * 1024
    return 1 << 62


def memory_for(need: int) -> int:
    """A job's address-space cap for a problem whose verification holds `need` bytes (estimated from its
    sizes): twice that beside the base, within the host's memory. A fixed 8 GiB holds three copies of a
    model's weights and their float64 reference up to about 2 GB of weights, not a quarter of a 24 GB host."""
    return max(BASE_MEMORY, min(BASE_MEMORY + 2 * need, host_memory()))


def _preexec(memory_bytes: int | None) -> None:
    os.setsid()
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if memory_bytes:
        resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    try:  # a private network namespace with only a loopback device, where the kernel allows it
        ctypes.CDLL(None, use_errno=True).unshare(CLONE_NEWNET)
    except Exception:  # noqa: BLE001 - the worker's audit hook still blocks Python-level network use
        pass


# what a job keeps of the caller's environment (the rest is the sandbox's own)
KEEP = ("PATH", "LANG", "LC_ALL", "CUDA_VISIBLE_DEVICES", "CUDA_HOME", "LD_LIBRARY_PATH", "OMP_NUM_THREADS",
        "AKG_CUDA_LOADER", "PYTHONPATH", "NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS")


def _env(run_dir: Path, device: str, build_cache: str | None = None) -> dict[str, str]:
    env = {k: os.environ[k] for k in KEEP if k in os.environ}
    root = str(Path(__file__).resolve().parents[2])  # so the worker imports this checkout's packages
    env["PYTHONPATH"] = os.pathsep.join([root] + ([env["PYTHONPATH"]] if "PYTHONPATH" in env else []))
    env.update(HOME=str(run_dir), TMPDIR=str(run_dir), TORCHINDUCTOR_CACHE_DIR=str(run_dir / ".inductor"),
               PYTHONDONTWRITEBYTECODE="1")
    if device == "cpu":  # JAX's arrays stay on the host (a GPU client under the job's memory cap cannot start)
        env["JAX_PLATFORMS"] = "cpu"
    # what each backend's manifest asks for
    env.update(sandbox_env(run_dir, on_cpu=device == "cpu", build_dir=Path(build_cache) if build_cache else None))
    if build_cache:  # compiled code kept for this candidate's next run (else it lives and dies with run_dir)
        env["AKG_CACHE_DIR"] = build_cache
    # what depends on the installed compilers alone (a DSL's precompiled runtime header), shared by runs
    env["AKG_TOOLCHAIN_CACHE"] = os.environ.get("AKG_TOOLCHAIN_CACHE") or str(cache_dir() / "toolchain")
    return env


class _Zygote:
    """This process's fork server (`zygote`), started on first use and again if it has died. The server
    imports torch and torch._dynamo once for all its jobs (and, for CPU jobs, what the manifests ask it
    to preload); a module imported there may read variables at import that its jobs set (Triton's
    interpreter switch decides what `@triton.jit` makes of triton.language's own functions), so CPU
    jobs and device jobs get a server each, started with what the manifests set for CPU runs or not. A CPU
    server imports the preloads of the DSLs its jobs are written in alone (`preloads`): a C++ module's
    server does not wait for TileLang's and JAX's imports."""

    def __init__(self, on_cpu: bool, preloads: tuple[str, ...] = ()) -> None:
        self.on_cpu, self.preloads = on_cpu, preloads
        self.proc: subprocess.Popen | None = None
        self.lock = threading.Lock()

    def start(self) -> subprocess.Popen:
        """The server, started if it is not running (its imports proceed while the caller goes on)."""
        with self.lock:
            if self.proc is None or self.proc.poll() is not None:
                root = str(Path(__file__).resolve().parents[2])
                path = os.pathsep.join([root, *filter(None, [os.environ.get("PYTHONPATH")])])
                # the server imports in the environment its jobs will run in, less their per-run paths
                env = {k: os.environ[k] for k in (*KEEP, "AKG_BACKEND_PATH") if k in os.environ}  # its manifests too
                env.update(import_env(self.on_cpu), PYTHONPATH=path)
                argv = [sys.executable, "-m", "akg_agent.verifier.zygote", "cpu" if self.on_cpu else "device",
                        *self.preloads]
                self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env,
                                             start_new_session=True)
                atexit.register(self.stop, self.proc)
            return self.proc

    @staticmethod
    def stop(proc: subprocess.Popen) -> None:
        """At exit: the server's stdin closed (it kills its running jobs and ends), waited for briefly."""
        for pipe in (proc.stdin, proc.stdout):
            if pipe is not None:
                pipe.close()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def fork(self, req: dict[str, Any]) -> int:
        self.start()
        with self.lock:
            assert self.proc is not None and self.proc.stdin is not None and self.proc.stdout is not None
            self.proc.stdin.write(json.dumps(req) + "\n")
            self.proc.stdin.flush()
            answer = self.proc.stdout.readline()
        if not answer.strip():
            raise OSError("the verifier's fork server died")
        return int(answer)


_ZYGOTES: dict[tuple[bool, tuple[str, ...]], _Zygote] = {}
_ZYGOTES_LOCK = threading.Lock()


def zygote(on_cpu: bool, preloads: tuple[str, ...] = ()) -> _Zygote:
    """The fork server for CPU or device jobs whose modules need `preloads` imported (made on first use)."""
    key = (on_cpu, tuple(sorted(preloads)) if on_cpu else ())
    with _ZYGOTES_LOCK:
        return _ZYGOTES.setdefault(key, _Zygote(*key))


class _Forked:
    """A job forked by the zygote, with the few Popen methods `run_job` uses (returncode negative for a
    signal, as Popen's)."""

    def __init__(self, job_path: Path, run_dir: Path, env: dict[str, str], memory_bytes: int | None,
                 on_cpu: bool, preloads: tuple[str, ...] = ()) -> None:
        self.log, self.status = run_dir / "worker.log", run_dir / "exit_status"
        self.pid = zygote(on_cpu, preloads).fork({"job": str(job_path), "run_dir": str(run_dir), "env": env,
                                 "memory_bytes": memory_bytes, "log": str(self.log), "status": str(self.status)})
        self.returncode: int | None = None

    def communicate(self, timeout: float | None = None) -> tuple[bytes, None]:
        end = None if timeout is None else time.monotonic() + timeout
        while not self.status.is_file():
            if end is not None and time.monotonic() > end:
                raise subprocess.TimeoutExpired("verifier worker", timeout or 0)
            time.sleep(0.02)
        self.returncode = int(self.status.read_text())
        return (self.log.read_bytes() if self.log.is_file() else b""), None


def _forks() -> bool:
    return os.environ.get("AKG_VERIFIER_FORK", "1") != "0" and sys.platform == "linux"


def _use_fork(job: dict[str, Any]) -> bool:
    return not job.get("prefix") and not job.get("fresh") and _forks()


def prestart(on_cpu: bool, preloads: tuple[str, ...] = ()) -> None:
    """Start the fork server for CPU or device jobs (of modules needing `preloads`) now, so that its imports
    (torch, 5-10 s) overlap what the caller does before its first verification (dynamo's trace, the lift and
    the plan)."""
    if _forks():
        zygote(on_cpu, preloads).start()


def lock_wait(path: Path) -> float:
    """Seconds a run has spent waiting for the shared timing lock, as it notes them (timing.WAIT_PATH)."""
    try:
        waited, since = map(float, path.read_text().split())
    except (OSError, ValueError):
        return 0.0
    return waited + (time.time() - since if since else 0.0)


def communicate(proc: subprocess.Popen | _Forked, timeout_s: float, wait_file: Path) -> bytes | None:
    """The process's output, or None once it has run `timeout_s` of its own time: what it spends
    waiting for another run's timing (`akg bench --jobs`) does not count."""
    start = time.monotonic()
    while True:
        left = start + timeout_s + lock_wait(wait_file) - time.monotonic()
        if left <= 0:
            return None
        try:
            return proc.communicate(timeout=min(left, 1.0))[0]
        except subprocess.TimeoutExpired:
            continue


class _Stamps:
    """The parent's clock on the marks a timed run sends through a FIFO (`window.run`): lines carrying
    the job's nonce, stamped as they arrive by a thread of this process."""

    def __init__(self, path: Path, nonce: str) -> None:
        self.path, self.nonce = path, nonce
        self.marks: dict[str, float] = {}
        os.mkfifo(path, 0o600)
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        with open(self.path, "rb", buffering=0) as f:  # blocks until the worker (or `close`) opens it
            buf = b""
            while chunk := f.read(4096):
                now = time.monotonic()
                buf += chunk
                *lines, buf = buf.split(b"\n")
                for line in lines:
                    nonce, _, label = line.decode(errors="replace").partition(" ")
                    if nonce == self.nonce and label not in self.marks:
                        self.marks[label] = now

    def close(self) -> dict[str, float]:
        """Seconds between each begin mark and its end mark, by window ("0", "1", ...); empty where the run sent
        none. The reader is let go once; later calls only read the marks."""
        if not self.thread.is_alive():
            return self._spans()
        try:  # a worker that never opened the FIFO leaves the reader waiting in open(): let it through
            os.close(os.open(self.path, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:
            pass
        self.thread.join(timeout=1.0)
        return self._spans()

    def _spans(self) -> dict[str, float]:
        return {b[5:]: self.marks["end" + b[5:]] - t for b, t in self.marks.items()
                if b.startswith("begin") and "end" + b[5:] in self.marks}


_ERRORISH = re.compile(r"error|fatal|invalid|abort|check failed|cannot|failed", re.IGNORECASE)


def _crash_line(log: str) -> str:
    """The line of a crashed job's log that most likely says why: the last one that reads like an error
    (a runtime's fatal message; not a frame of the stack dump printed after it), else the last line."""
    lines = [ln.strip() for ln in log.splitlines() if ln.strip()]
    said = [ln for ln in lines if _ERRORISH.search(ln) and not ln.startswith(("@", "File ", "Fatal Python"))]
    return (said or lines or [""])[-1]


def run_job(job: dict[str, Any], limits: Limits, keep_dir: bool = False) -> dict[str, Any]:
    run_dir = Path(tempfile.mkdtemp(prefix="akg-verify-"))
    stamps = None
    try:
        cand = run_dir / "candidate.py"
        shutil.copyfile(job["cand"], cand)  # a real file in the run directory: Triton reads its source
        job = dict(job, cand=str(cand), result=str(run_dir / "result.json"), nonce=secrets.token_hex(16))
        if job.get("timing"):
            job["barrier"] = str(run_dir / "barrier")
            stamps = _Stamps(run_dir / "barrier", job["nonce"])
        (run_dir / "job.json").write_text(json.dumps(job))
        mem = limits.memory_bytes if job["device"] == "cpu" else None
        # a profiler may wrap the worker ("{run_dir}" in its arguments is this run's directory)
        prefix = [a.replace("{run_dir}", str(run_dir)) for a in job.get("prefix", [])]
        proc: subprocess.Popen | _Forked
        if _use_fork(job):
            cpu = job["device"] == "cpu"
            needs = tuple(preload_for_source(cand.read_text(errors="replace"))) if cpu else ()
            proc = _Forked(run_dir / "job.json", run_dir, _env(run_dir, job["device"], job.get("build_cache")), mem,
                           cpu, needs)
        else:
            proc = subprocess.Popen([*prefix, sys.executable, "-m", "akg_agent.verifier.worker",
                                     str(run_dir / "job.json")],
                                    cwd=run_dir, env=_env(run_dir, job["device"], job.get("build_cache")),
                                    stdin=subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    preexec_fn=lambda: _preexec(mem))
        output = communicate(proc, limits.timeout_s, run_dir / LOCK_WAIT_FILE)
        if output is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            return {"status": "rejected", "code": "timeout",
                    "reason": f"timed out after {limits.timeout_s:g} s (a hung kernel, or far too slow)", "details": {}}
        result_file = run_dir / "result.json"
        if proc.returncode and proc.returncode < 0:
            name = signal.Signals(-proc.returncode).name
            text = output.decode(errors="replace")
            why = _crash_line(text)
            return {"status": "rejected", "code": "crash",
                    "reason": f"candidate crashed the process ({name})" + (f": {why[:300]}" if why else ""),
                    "details": {"output": text[-2000:]}}
        if not result_file.is_file():
            tail = output.decode(errors="replace").strip().splitlines()[-1:] or ["no output"]
            code = "memory" if "MemoryError" in output.decode(errors="replace") else "crash"
            return {"status": "rejected", "code": code,
                    "reason": f"verifier process died (exit {proc.returncode}): {tail[0][:300]}", "details": {}}
        try:
            result = json.loads(result_file.read_text())
        except ValueError:
            result = {}
        if not isinstance(result, dict) or result.pop("nonce", None) != job["nonce"]:
            return {"status": "rejected", "code": "forged", "details": {},
                    "reason": "the result file lacks the job's nonce: it was not written by the verifier "
                              "(the candidate wrote a verdict of its own)"}
        result.setdefault("details", {})["output"] = output.decode(errors="replace")[-2000:]
        if stamps is not None:
            result["details"]["window_parent_s"] = stamps.close()
        for name in job.get("collect", []):  # files the wrapper wrote (a profiler's report)
            f = run_dir / name
            result["details"][name] = f.read_text(errors="replace") if f.is_file() else None
        return result
    finally:
        if stamps is not None:
            stamps.close()
        if not keep_dir:
            shutil.rmtree(run_dir, ignore_errors=True)
