"""A rendered C++ module's library built before its verification, in the caller's process: g++ runs while
the verifier's fork server still imports torch (on a 2-core host each took seconds of a model's first call,
one after the other). Only akg's own build helpers run here (`backend.BUILD`, less its last statements,
which load the library); the module's source is parsed for its C++ text and flags, never executed. The
worker's import then finds the library under the same key, or builds it itself where this did not finish."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

from .backend import BUILD

LOAD = "\n_AKG_CMD, _AKG_CPU = "  # where BUILD's definitions end and its loading begins


def _literals(module_source: str, names: tuple[str, ...]) -> dict[str, Any]:
    """The module-level constants `names` assigns (strings, lists), read from its syntax tree."""
    found: dict[str, Any] = {}
    for node in ast.parse(module_source).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                and node.targets[0].id in names:
            found[node.targets[0].id] = ast.literal_eval(node.value)
    return found


def prebuild(module_source: str, build_dir: str | Path) -> str | None:
    """The module's library built under `build_dir` as the worker's import (AKG_CACHE_DIR = `build_dir`)
    would build it; its path, or None for a module that is not a rendered C++ one."""
    consts = _literals(module_source, ("_AKG_SOURCE", "_AKG_VECTOR_MATH", "_AKG_PCH_HEADER", "_AKG_FLAGS"))
    if LOAD not in BUILD or not {"_AKG_SOURCE", "_AKG_FLAGS"} <= consts.keys():
        return None
    ns: dict[str, Any] = dict(consts)
    exec(compile(BUILD.split(LOAD)[0], "<akg cpp build helpers>", "exec"), ns)  # akg's helpers, not the module
    ns.update(consts)  # the module's own flags over the helpers' defaults
    src = consts["_AKG_SOURCE"]
    cmd, cpu = ["g++", *consts["_AKG_FLAGS"], *ns["_akg_mvec"](), *ns["_akg_pyext"](src)], ns["_akg_cpu"]()
    return ns["_akg_build"](src, cmd, ".cpp", "cpp", cpu, lambda: ns["_akg_pch"](cmd, cpu), base=str(build_dir))
