"""A fork server for verifier jobs: `python -m akg_agent.verifier.zygote cpu|device [module ...]` imports
torch, the worker and the modules named (for CPU jobs, what their DSLs' manifests preload) once, then
forks one child per job read from stdin (a JSON line), answers the child's pid on stdout, and writes the
child's exit code (negative for a signal) to the job's status file when it ends. When its caller goes away (stdin
closes), the jobs still running are killed.

The child takes the job's isolation before anything of the candidate is read: its own session, the
memory and core-dump limits, a private network namespace where the kernel allows it, stdin from
/dev/null, stdout and stderr to the job's log, the run directory and the job's environment. Unlike
Python's multiprocessing, nothing of the caller's `__main__` is re-run in the child."""

from __future__ import annotations

import importlib
import json
import os
import signal
import sys
import tempfile

import torch
import torch._dynamo  # noqa: F401 - a candidate's first tensor op under the verifier's guard imports it: 2 s a job

from akg_agent.verifier import worker
from akg_agent.verifier.sandbox import _preexec


def _preload(names: list[str]) -> None:
    """The modules the jobs' manifests ask for, imported once here rather than in every job; one that fails
    to import is left to the jobs (they report it)."""
    for name in names:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - a missing or broken package fails its own jobs, with their reason
            pass


def _child(req: dict) -> None:
    code = 1
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGCHLD})
        _preexec(req["memory_bytes"])
        fd = os.open(req["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.chdir(req["run_dir"])
        os.environ.clear()
        os.environ.update(req["env"])
        tempfile.tempdir = None  # TMPDIR is the run directory's now
        if req["env"].get("OMP_NUM_THREADS", "").isdigit():  # torch read it when the server imported it
            torch.set_num_threads(int(req["env"]["OMP_NUM_THREADS"]))
        code = worker.main(["worker", req["job"]])
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def serve() -> None:
    status: dict[int, str] = {}  # child pid -> its job's status file

    def reap(*_: object) -> None:
        while True:
            try:
                pid, st = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            path = status.pop(pid, None)
            if path:
                with open(path + ".tmp", "w") as f:
                    f.write(str(os.waitstatus_to_exitcode(st)))
                os.replace(path + ".tmp", path)  # the caller sees the whole number or nothing

    signal.signal(signal.SIGCHLD, reap)  # no thread: the server forks from a single-threaded process
    for line in sys.stdin:
        req = json.loads(line)
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCHLD})  # registered before the child can end
        pid = os.fork()
        if pid == 0:
            _child(req)
        status[pid] = req["status"]
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGCHLD})
        sys.stdout.write(f"{pid}\n")
        sys.stdout.flush()
    # the caller is gone (it exited, or was killed): no job of its outlives it, hung or not
    for pid in list(status):
        try:
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


if __name__ == "__main__":
    _preload(sys.argv[2:])
    serve()
