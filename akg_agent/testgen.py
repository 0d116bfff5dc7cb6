"""`akg testgen PROBLEM MODULE`: a standalone pytest file for a written module. It needs torch (JAX for
a JAX problem, whose module is checked as `model(params, *inputs)`) and the module's DSL runtime only
(not akg): the problem and the module travel inside it as text. It checks the module against the
reference (and its float64 evaluation) on several seeds, on signed, large and zero inputs, that NaN
propagates where the reference propagates it, and that the guard refuses inputs outside the module's
envelope; a benchmark runs with AKG_BENCHMARK=1."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

from ir.errors import AkgError
from ir.jax_lift import is_jax_problem, load_jax_problem
from ir.problem import load_problem

from .verifier.policy import DEFAULT_TOLERANCES
from .verifier.sizes import dynamic_sizes
from .version import __version__

BODY = Path(__file__).with_name("testgen_body.py.txt")
JAX_BODY = Path(__file__).with_name("testgen_jax_body.py.txt")  # a JAX problem: model(params, *inputs)

HEADER = '''"""Tests of {module} against {problem}, written by `akg testgen` (akg {version}).
Needs torch and the module's DSL runtime. Run: pytest {out}; time it: AKG_BENCHMARK=1 pytest {out}
"""

import atexit
import copy
import importlib.util
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import warnings

import pytest
import torch

with warnings.catch_warnings():  # the mark is pytest-benchmark's, registered only where it is installed
    warnings.simplefilter("ignore")
    _BENCHMARK = pytest.mark.benchmark

PROBLEM_SOURCE = {problem_source}
MODULE_SOURCE = {module_source}
TOLERANCES = {tolerances}  # dtype -> (atol, rtol), as akg's verifier
SEEDS = {seeds}
DYNAMIC = {dynamic}  # the module's run-time sizes (akg translate --dynamic): name -> bound and dimensions
SIZES = {sizes}  # sizes inside its envelope that the tests run it at
RANDOM_SEED = 10007  # seeds torch before each call of either model (random ops inside forward)
TRIALS = 20
_DIR = Path(tempfile.mkdtemp(prefix="akg-testgen-"))  # the sources the tests import, removed at exit
atexit.register(shutil.rmtree, _DIR, True)
'''


def generate(problem_path: str | Path, module_path: str | Path, out: str | Path,
             seeds: tuple[int, ...] = (0, 1, 2, 3, 4)) -> Path:
    problem_path, module_path, out = Path(problem_path), Path(module_path), Path(out)
    jax_problem = is_jax_problem(problem_path)
    # a problem that does not load is a one-line error here, not in the test
    load_jax_problem(problem_path) if jax_problem else load_problem(problem_path)
    try:
        module_source = module_path.read_text()
    except OSError as e:
        raise AkgError(f"cannot read the module {module_path}: {e.strerror}") from None
    if jax_problem and "\ndef model(params, " not in module_source:
        raise AkgError(f"{module_path} defines no model(params, *inputs): pass the module akg translate wrote for "
                       f"{problem_path.name}")
    if "class ModelNew" not in module_source:
        raise AkgError(f"{module_path} defines no ModelNew: pass a module written by akg translate (or one of "
                       "the same form)")
    tolerances = {str(dt).replace("torch.", ""): tol for dt, tol in DEFAULT_TOLERANCES.items()}
    dynamic = _declared_dynamic(module_source)
    sizes = sorted({*dynamic_sizes(dynamic), *(v["traced"] for v in dynamic.values())})
    text = HEADER.format(module=module_path.name, problem=problem_path.name, version=__version__, out=out.name,
                         problem_source=repr(problem_path.read_text()), module_source=repr(module_source),
                         tolerances=repr(tolerances), seeds=repr(tuple(seeds)), dynamic=repr(dynamic),
                         sizes=repr(sizes))
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text + (JAX_BODY if jax_problem else BODY).read_text())
    except OSError as e:
        raise AkgError(f"cannot write the test file {out}: {e.strerror}; pass -o a path in a writable folder") from None
    return out


def _declared_dynamic(source: str) -> dict[str, Any]:
    """The module's `AKG_DYNAMIC` (its run-time sizes), read from its text without running it."""
    for line in source.splitlines():
        if line.startswith("AKG_DYNAMIC = "):
            return ast.literal_eval(line[len("AKG_DYNAMIC = "):])
    return {}
