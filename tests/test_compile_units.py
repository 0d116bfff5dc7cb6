"""A written C++ module's source is marked in units (prelude, then one per kernel): its build compiles them as
translation units in parallel, as many as the CPUs it may use, and links them; the whole source still compiles
as one file. The built library has every kernel; a unit that fails names the compiler's error and leaves no
temporary file behind."""

from __future__ import annotations

import ctypes
import subprocess
from pathlib import Path
from typing import Any

import pytest

from dsl_backends.module import COMPILE_CACHED, UNIT

PRELUDE = "#include <cstdint>\nstatic inline int64_t twice(int64_t x) { return 2 * x; }\n"
KERNELS = [f'extern "C" int64_t k{i}(int64_t x) {{ return twice(x) + {i}; }}\n' for i in range(5)]
FLAGS = ["g++", "-O1", "-shared", "-fPIC"]


def _runtime(cpus: int, calls: list[list[str]]) -> dict[str, Any]:
    class Recording:  # the real compiler, its command lines recorded
        PIPE = subprocess.PIPE

        @staticmethod
        def Popen(cmd: list[str], **kw: Any) -> subprocess.Popen:  # noqa: N802 - subprocess' own name
            calls.append(cmd)
            return subprocess.Popen(cmd, **kw)

    ns: dict[str, Any] = {}
    exec(compile(COMPILE_CACHED, "<compile>", "exec"), ns)
    ns["_subprocess"] = Recording
    ns["_os"] = type("Os", (), {"environ": {}, "sched_getaffinity": staticmethod(lambda _: set(range(cpus))),
                                "getpid": staticmethod(lambda: 1), "replace": staticmethod(__import__("os").replace)})
    return ns


def test_the_runtime_marks_units_as_the_renderer_does():
    ns: dict[str, Any] = {}
    exec(compile(COMPILE_CACHED, "<compile>", "exec"), ns)
    assert ns["_AKG_UNIT"] == UNIT


@pytest.mark.parametrize("cpus", [1, 2, 8])
def test_units_are_balanced_over_the_cpus_and_each_has_the_prelude(cpus):
    ns = _runtime(cpus, [])
    src = PRELUDE + "".join(UNIT + k for k in KERNELS)
    units = ns["_akg_units"](src)
    assert len(units) == min(cpus, len(KERNELS)) if cpus > 1 else units == [src]
    assert all(u.startswith(PRELUDE) for u in units)
    assert sorted(k for u in units for k in KERNELS if k in u) == sorted(KERNELS)  # each kernel in one unit
    assert sum(u.count("extern") for u in units) == len(KERNELS)


def test_a_marked_source_builds_in_parallel_units_into_one_library(tmp_path, monkeypatch):
    monkeypatch.setenv("AKG_CACHE_DIR", str(tmp_path))
    calls: list[list[str]] = []
    ns = _runtime(2, calls)
    ns["_os"].environ = {"AKG_CACHE_DIR": str(tmp_path)}
    src = PRELUDE + "".join(UNIT + k for k in KERNELS)
    lib = ns["_akg_compile"](src, FLAGS, ".cpp", "cpp")
    assert [int(getattr(lib, f"k{i}")(ctypes.c_int64(10))) for i in range(5)] == [20, 21, 22, 23, 24]
    compiles, link = calls[:-1], calls[-1]
    assert len(compiles) == 2 and all("-c" in c and "-shared" not in c for c in compiles)
    assert "-shared" in link and sum(a.endswith(".o") for a in link) == 2
    (built,) = [p for p in tmp_path.rglob("*") if p.is_file() and p.suffix in (".so", ".cpp", ".o")
                and p.name != "kernels.so"]
    assert built.name == "kernels.cpp" and built.read_text() == src  # the whole source kept, no unit left
    single = tmp_path / "single.cpp"
    single.write_text(src)  # the marks are comments: one file compiles too
    subprocess.run([*FLAGS, str(single), "-o", str(tmp_path / "single.so")], check=True)


def test_a_failing_unit_names_the_error_and_leaves_no_temporary_file(tmp_path):
    calls: list[list[str]] = []
    ns = _runtime(2, calls)
    ns["_os"].environ = {"AKG_CACHE_DIR": str(tmp_path)}
    src = PRELUDE + UNIT + KERNELS[0] + UNIT + 'extern "C" int broken( { }\n'
    with pytest.raises(RuntimeError, match="(?s)g\\+\\+ failed: .*error: expected"):
        ns["_akg_compile"](src, FLAGS, ".cpp", "cpp")
    assert len(calls) == 2  # both units compiled, no link
    left = [p.name for p in Path(tmp_path).rglob("*") if p.is_file()]
    assert all(not n.endswith((".o", ".so")) and n.count(".") == 3 for n in left), left  # only the whole source
