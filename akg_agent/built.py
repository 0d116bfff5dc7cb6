"""A verified module run with the code its verification compiled: the verifier's run keeps its build in the
cache entry's `build/` folder (Triton's cubins, a C++ library, a CUDA extension), and the module, imported
and first called with the manifests' build variables pointing there, loads that code instead of compiling
it again (on the H200, GPT-2's 60 Triton kernels took 11-13 s to compile in the verifier's run alone).

Only for modules akg rendered itself from the user's own graph (the torch.compile path): the folder is
written by the sandboxed run, so a module written by an LLM never has its build adopted this way."""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import os
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from dsl_backends import build_env

_LOCK = threading.RLock()  # os.environ is the process's: one module's build variables set at a time


@contextlib.contextmanager
def built_in(build_dir: Path) -> Iterator[None]:
    """The manifests' build variables (and AKG_CACHE_DIR) at `build_dir` while the block runs."""
    env = build_env(build_dir)
    with _LOCK:
        before = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        try:
            yield
        finally:
            for k, v in before.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v


class FirstCallBuilt:
    """`fn` whose first call (where JIT DSLs compile their kernels) runs `built_in(build_dir)`."""

    def __init__(self, fn: Callable[..., Any], build_dir: Path) -> None:
        self.fn, self.build_dir, self.called = fn, build_dir, False

    def __call__(self, *args: Any) -> Any:
        if self.called:
            return self.fn(*args)
        with built_in(self.build_dir):
            out = self.fn(*args)
        self.called = True
        return out


def load_written(cached: Path, device: torch.device | None = None) -> Callable[..., tuple[Any, ...]]:
    """A cache entry's written module, its state from the graph it replays, as the graph's callable (its
    outputs a tuple, with the graph's constant outputs, Nones among them, in their places)."""
    name = cached.name
    with built_in(cached / "build"):  # a C-family module builds (or loads its build) at import
        model = _import(cached / "module.py", f"akg_compiled_{name}").ModelNew()
    reference = _import(cached / "graph.py", f"akg_graph_{name}")
    model.load_state_dict(reference.Model().state_dict(), strict=True)  # the graph's constants
    model.to(device or torch.device("cpu")).eval()
    saved = torch.load(cached / "graph.pt", weights_only=False)
    outs = Outputs(saved["kept"], saved.get("fixed", {}), saved.get("passed", {}), saved["n_out"])
    return FirstCallBuilt(functools.partial(_call, model, outs), cached / "build")  # a JIT DSL compiles at first call


def _import(path: Path, name: str) -> Any:
    """A module akg wrote (and verified) or the problem it wrote for a graph, imported from its file."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


@dataclass(frozen=True)
class Outputs:
    """Where a graph's outputs come from: the module's (`kept`, in its order), constants at the written sizes
    (`fixed`: Nones, sizes), inputs handed back as they are (`passed`: output -> input position)."""

    kept: list[int]
    fixed: dict[int, Any]
    passed: dict[int, int]
    n: int


def _call(model: torch.nn.Module, outs: Outputs, *args: Any) -> tuple[Any, ...]:
    """The graph's outputs from the module's, its constant outputs and passed inputs in their places."""
    got = model(*args)
    got = (got,) if len(outs.kept) == 1 else tuple(got)
    if len(outs.kept) == outs.n:
        return got
    out: list[Any] = [outs.fixed.get(i) for i in range(outs.n)]
    for i, v in zip(outs.kept, got):
        out[i] = v
    for i, j in outs.passed.items():
        out[i] = args[j]
    return tuple(out)
