"""JAX programs in: a problem file's `model(params, *inputs)` traced to a jaxpr and converted, primitive by
primitive, into the same graph IR the PyTorch lift builds (each op's meaning stays the interpreter's).

The problem convention (docs in README, "JAX programs"): a module defining
  model(params, *inputs)     the program: a pure function of a parameter pytree and arrays
  get_params(key)            the parameters (a pytree of arrays) from a jax.random key
  get_inputs(key)            the inputs (a list of arrays) from a jax.random key
Parameters become graph weights named by their pytree path (`layers.0.w`), inputs keep the argument
names of `model`. A primitive without a converter is a one-line error naming it and its source line.
"""

from __future__ import annotations

import importlib.util
import inspect
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from .errors import AkgError
from .graph import Graph
from .jax_prims import Cx, convert_jaxpr, ir_dtype, to_torch
from .types import TensorType


@dataclass
class JaxProblem:
    path: Path
    module: ModuleType
    model: Callable[..., Any]
    get_params: Callable[[Any], Any]
    get_inputs: Callable[[Any], Any]

    @property
    def name(self) -> str:
        return self.path.stem

    def make(self, seed: int = 0) -> tuple[Any, list[Any]]:
        """(params, inputs) for this seed: parameters from key 0 always (they are the model's state),
        inputs from `seed`."""
        import jax

        return self.get_params(jax.random.key(0)), list(self.get_inputs(jax.random.key(seed)))

    def input_names(self) -> list[str]:
        names = list(inspect.signature(self.model).parameters)[1:]
        return names if names and not names[0].startswith("*") else []


def is_jax_problem(path: Path) -> bool:
    """A problem file written against JAX: it defines `model(params, ...)`, not a `Model` class."""
    p = Path(path)
    if p.suffix != ".py" or not p.is_file():  # the PyTorch loader names a missing file
        return False
    text = p.read_text()
    return "def model(" in text and "class Model" not in text


def load_jax_problem(path: str | Path) -> JaxProblem:
    path = Path(path).resolve()
    # JAX would take 75% of the GPU when its client starts (read then, not at import): akg's process and the
    # verifier's each hold a client beside torch, and a second client's start fails on what the first took
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    spec = importlib.util.spec_from_file_location(f"akg_jax_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise AkgError(f"cannot import {path}: not a Python file")
    mod = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(mod)
    except Exception as e:  # noqa: BLE001 - user code: one line naming the cause
        raise AkgError(f"importing {path} raised {type(e).__name__}: {e}".splitlines()[0]) from None
    missing = [n for n in ("model", "get_params", "get_inputs") if not callable(getattr(mod, n, None))]
    if missing:
        raise AkgError(f"{path.name} defines no {', '.join(missing)}: a JAX problem needs model(params, *inputs), "
                       f"get_params(key) and get_inputs(key)")
    return JaxProblem(path, mod, mod.model, mod.get_params, mod.get_inputs)


def lift_jax(problem: JaxProblem) -> Graph:
    """The JAX problem's model as a graph; parameters (from key 0) are its weights."""
    import jax

    params, inputs = problem.make(0)
    closed = jax.make_jaxpr(problem.model)(params, *inputs)
    g = Graph(problem.name)
    g.meta.update(problem=str(problem.path), frontend="jax")
    cx = Cx(g, problem.path)
    flat, _ = jax.tree_util.tree_flatten_with_path(params)
    jaxpr = closed.jaxpr
    n_params = len(flat)
    if len(jaxpr.invars) != n_params + len(inputs):
        raise AkgError(f"{problem.path.name}: model's inputs must be arrays (got {len(jaxpr.invars) - n_params} "
                       f"array leaves for {len(inputs)} inputs)")
    keys = []
    for (kp, leaf), var in zip(flat, jaxpr.invars[:n_params]):
        keys.append(".".join(_key_part(k) for k in kp) or "params")
        cx.env[var] = g.param(keys[-1], to_torch(leaf))
    names = problem.input_names() or [f"x{i}" for i in range(len(inputs))]
    g.meta.update(jax_params=keys, jax_inputs=names)  # a written module's JAX entry takes these
    g.meta["state_dict"] = [(k, tuple(int(d) for d in leaf.shape), ir_dtype(leaf.dtype), "parameter")
                            for k, (_, leaf) in zip(keys, flat)]  # ModelNew holds every leaf, as params
    for i, var in enumerate(jaxpr.invars[n_params:]):
        aval = var.aval
        cx.env[var] = g.input(names[i] if i < len(names) else f"x{i}",
                              TensorType(tuple(aval.shape), ir_dtype(aval.dtype)))
    for var, value in zip(jaxpr.constvars, closed.consts):
        cx.env[var] = cx.const(value)
    outs = convert_jaxpr(cx, jaxpr, [cx.env[v] for v in jaxpr.invars])
    g.outputs = list(outs)
    g.cleanup()
    return g


def _key_part(k: Any) -> str:
    for attr in ("key", "idx", "name"):
        if hasattr(k, attr):
            return str(getattr(k, attr))
    return str(k)


