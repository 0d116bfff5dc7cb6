from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

import pytest
import torch

# Tests never read or write the user's cache (tuning database, calibrated hardware profiles): each test
# process gets an empty one, so a test's prompts and choices do not depend on earlier runs; removed when the
# process ends (each run's compiled modules: about 12 MB)
os.environ["AKG_CACHE_DIR"] = tempfile.mkdtemp(prefix="akg-test-cache-")
atexit.register(shutil.rmtree, os.environ["AKG_CACHE_DIR"], True)
# what depends on the compilers alone (precompiled headers) is built once per test process, not per test
os.environ["AKG_TOOLCHAIN_CACHE"] = os.path.join(os.environ["AKG_CACHE_DIR"], "toolchain")

SESSION_CACHE = Path(os.environ["AKG_CACHE_DIR"])


@pytest.fixture(autouse=True)
def _no_tuning_database_between_tests():
    """Each test starts without the tuning database earlier tests of this process wrote: a translate or
    bench that found its module slower than eager records the library's time there, and a later build of
    the same problem would take that plan (the process's compiled modules stay)."""
    yield
    for suffix in ("", "-journal", "-wal", "-shm"):
        (SESSION_CACHE / f"tuning.sqlite{suffix}").unlink(missing_ok=True)


ROOT = Path(__file__).resolve().parent.parent
# the example backend of docs/adding-a-backend.md (NumPy) is found like any out-of-tree backend
os.environ["AKG_BACKEND_PATH"] = str(ROOT / "tests" / "backend_example")
PROBLEMS = sorted((ROOT / "tests" / "problems").glob("*.py"))
KERNELBENCH = ROOT / "tests" / "kernelbench"
# every backend on every suite problem (`make test` runs the slowest interpreters on part of the suite)
FULL_CONFORMANCE = bool(os.environ.get("AKG_FULL_CONFORMANCE"))


def _slowest() -> dict[str, float]:
    path = ROOT / "tests" / "slowest.txt"
    rows = [ln.split(" ", 1) for ln in path.read_text().splitlines() if ln and not ln.startswith("#")]
    return {test: float(s) for s, test in rows}


def pytest_collection_modifyitems(config, items):
    # the slowest tests first, slowest of all first: xdist hands each worker a block of the list and an idle
    # worker steals from the end of another's queue, so a long test left near the end keeps one worker busy
    # while the others wait (`tests/slowest.txt`, from a measured run)
    slow = _slowest()
    items.sort(key=lambda item: -slow.get(item.nodeid, 0.0))  # stable: the rest keep their order
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs an NVIDIA GPU (run on the device machine)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def problem_path(name: str) -> Path:
    return ROOT / "tests" / "problems" / f"{name}.py"


@pytest.fixture(scope="session")
def lifted():
    """Cache of lifted suite problems: name -> (problem, graph). Tests copy graphs before mutating."""
    from ir.lift import lift
    from ir.problem import load_problem

    cache: dict[str, tuple] = {}

    def get(name: str):
        if name not in cache:
            path = problem_path(name)  # a suite problem, else a fixture (not in every backend's suite)
            p = load_problem(path if path.exists() else ROOT / "tests" / "fixtures" / f"{name}.py")
            cache[name] = (p, lift(p))
        p, g = cache[name]
        return p, g.copy()

    return get
