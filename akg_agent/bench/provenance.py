"""Where a result came from, written into its `meta`: the git commit of the code (marked dirty where the tree
had uncommitted changes), the versions of the packages that did the work, the machine, and the command,
with no path of the machine it ran on (paths inside the project are written relative to its root; other
paths by their last part)."""

from __future__ import annotations

import importlib.metadata
import os
import platform
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from akg_agent.version import __version__

ROOT = Path(__file__).resolve().parents[2]


def _git(*args: str) -> str | None:
    exe = shutil.which("git")
    if exe is None:
        return None
    try:
        r = subprocess.run([exe, *args], cwd=ROOT, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return r.stdout.strip() if r.returncode == 0 else None


def commit() -> str | None:
    """HEAD's hash, with '+dirty' where tracked files differ from it; None outside a git checkout."""
    head = _git("rev-parse", "HEAD")
    if head is None:
        return None
    return head + ("+dirty" if _git("status", "--porcelain", "--untracked-files=no") else "")


def _packages() -> list[str]:
    """What akg runs on: its dependencies and its extras' (the DSLs' runtimes), by distribution name, and the
    model set's transformers."""
    try:
        reqs = importlib.metadata.requires("akg") or []
    except importlib.metadata.PackageNotFoundError:
        reqs = []
    names = [re.split(r"[\s<>=!;\[~]", r, maxsplit=1)[0] for r in reqs]
    return sorted({n for n in names if n} | {"torch", "numpy", "jaxlib", "transformers"})


def versions() -> dict[str, str]:
    out = {"python": platform.python_version(), "akg": __version__}
    for name in _packages():
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return out


def machine() -> dict[str, Any]:
    """The host's CPU (model and cores this process may use) and its GPUs by name, where there are any."""
    cpu = platform.processor() or platform.machine()
    try:
        m = re.search(r"^model name\s*:\s*(.+)$", Path("/proc/cpuinfo").read_text(), re.M)
        cpu = m.group(1).strip() if m else cpu
    except OSError:
        pass
    out: dict[str, Any] = {"cpu": cpu, "cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                           else os.cpu_count(), "os": platform.system()}
    smi = shutil.which("nvidia-smi")
    if smi:
        try:
            r = subprocess.run([smi, "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True,
                               timeout=30)
            gpus = [line.strip() for line in r.stdout.splitlines() if line.strip()] if r.returncode == 0 else []
        except (OSError, subprocess.TimeoutExpired):
            gpus = []
        if gpus:
            out["gpus"] = gpus
    return out


def scrub(text: str) -> str:
    """`text` with every absolute path made relative to the project root (inside it) or cut to its last
    part (outside it)."""
    root = str(ROOT)

    def one(m: re.Match[str]) -> str:
        p = m.group(0)
        if p == root or p.startswith(root + os.sep):
            return os.path.relpath(p, root)
        return Path(p).name or p

    return re.sub(r"(?<![\w.])/[^\s,=:;'\"]+", one, text)


def command(argv: list[str] | None = None) -> str:
    args = sys.argv if argv is None else argv
    prog = "akg" if args and Path(args[0]).name in ("akg", "__main__.py", "-m") else Path(args[0]).name
    return scrub(" ".join([prog, *args[1:]]))


def provenance(argv: list[str] | None = None) -> dict[str, Any]:
    """The fields a result's `meta` carries so that anybody can tell what produced it."""
    return {"commit": commit(), "versions": versions(), "machine": machine(), "command": command(argv)}
