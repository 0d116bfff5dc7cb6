"""The C++ modules compile with the prelude's system headers precompiled (gcc's .gch), built once per
compiler, flags and CPU into the toolchain cache and shared by every module and verifier run."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess

import pytest
import torch

from akg_agent.translate import build, render

from .conftest import problem_path


def _import(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")
def test_modules_compile_with_one_precompiled_prelude_and_gcc_uses_it(tmp_path, monkeypatch):
    monkeypatch.setenv("AKG_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("AKG_TOOLCHAIN_CACHE", str(tmp_path / "toolchain"))
    for i, name in enumerate(("ew_activations_a", "red_var_std")):
        (tmp_path / f"m{i}.py").write_text(render(build(problem_path(name), "cpp", "cpu")))
        mod = _import(tmp_path / f"m{i}.py", f"m{i}")
    # both modules' compiles found the one header built for their command
    [gch] = (tmp_path / "toolchain").rglob("akg_cpp.h.gch")
    assert gch.stat().st_size > 0 and len(list((tmp_path / "cache" / "cpp").glob("*/kernels.so"))) == 2
    # gcc reads it (-H marks a precompiled header it used with "!"), and the kernels still compute
    (tmp_path / "k.cpp").write_text("#include <cmath>\nextern \"C\" float f(float x) { return std::exp(x); }\n")
    cmd = [*mod._AKG_CMD, "-Winvalid-pch", "-H", *mod._akg_pch(mod._AKG_CMD, mod._akg_cpu()),
           str(tmp_path / "k.cpp"), "-o", str(tmp_path / "k.so")]
    done = subprocess.run(cmd, capture_output=True, text=True)
    assert done.returncode == 0 and f"! {gch}" in done.stderr and "invalid" not in done.stderr, done.stderr[-2000:]
    prob = _import(problem_path("red_var_std"), "red_var_std_problem")
    torch.manual_seed(0)
    xs, model = prob.get_inputs(), prob.Model(*prob.get_init_inputs())
    torch.testing.assert_close(mod.ModelNew(*prob.get_init_inputs())(*xs), model(*xs))


def test_a_failing_precompile_builds_without_it(tmp_path, monkeypatch):
    monkeypatch.setenv("AKG_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("AKG_TOOLCHAIN_CACHE", str(tmp_path / "toolchain"))
    (tmp_path / "m.py").write_text(render(build(problem_path("red_var_std"), "cpp", "cpu")))
    mod = _import(tmp_path / "m.py", "m_fail")
    assert mod._akg_pch(["no-such-compiler", "-O3"], "") == []
