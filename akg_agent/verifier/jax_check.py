"""The verifier's check of a module written for a JAX problem (run in the sandboxed worker, like every
check): its `model(params, *inputs)` against the problem's own JAX `model` on every seed and on signed
inputs, each output judged as the PyTorch check judges it (the dtype's tolerance, with the reference's
own error against a float64 evaluation of it as the floor). The module's torch work runs under the
same ATen guard: a compute op it does not declare is a rejection."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from ir.jax_lift import load_jax_problem

from .guard import AtenGuard, undeclared
from .policy import Reject, TolerancePolicy, compare


def _torch(x: Any) -> torch.Tensor:
    import numpy as np

    return torch.from_numpy(np.array(x, copy=True))


def _leaves(out: Any) -> list[Any]:
    import jax

    return jax.tree_util.tree_leaves(out)


def _float64(problem: Any, params: Any, inputs: list[Any]) -> list[torch.Tensor] | None:
    """The reference evaluated with float64 parameters and inputs (None where it cannot run so)."""
    import jax
    import jax.numpy as jnp

    wide = (lambda a: a.astype(jnp.float64) if jnp.issubdtype(a.dtype, jnp.floating) else a)  # noqa: E731
    try:
        with jax.enable_x64(True):
            out = problem.model(jax.tree_util.tree_map(wide, params), *[wide(jnp.asarray(x)) for x in inputs])
            return [_torch(o) for o in _leaves(out)]
    except Exception:  # noqa: BLE001 - a reference that only runs in float32 is judged without the floor
        return None


def _signed(inputs: list[Any], seed: int) -> list[Any]:
    """Floating inputs redrawn from N(0, 4) (a program tested only on positive draws hides sign bugs)."""
    import jax
    import jax.numpy as jnp

    keys = jax.random.split(jax.random.key(seed), max(len(inputs), 1))
    return [2.0 * jax.random.normal(k, jnp.shape(x), jnp.asarray(x).dtype)
            if jnp.issubdtype(jnp.asarray(x).dtype, jnp.floating) else x for k, x in zip(keys, inputs)]


def check_jax(job: dict[str, Any], load_candidate: Any) -> dict[str, Any]:
    import jax

    problem = load_jax_problem(job["ref"])
    mod = load_candidate(Path(job["cand"]), modelnew=False)
    fn = getattr(mod, "model", None)
    if not callable(fn):
        raise Reject("no_model", "the candidate defines no model(params, *inputs) (a JAX problem's entry)")
    declared = list(getattr(mod, "AKG_LIBRARY_CALLS", []))
    policy = TolerancePolicy(overrides={k: tuple(v) for k, v in job.get("tolerances", {}).items()})
    trials: list[tuple[str, Any, list[Any]]] = []
    for sd in job["seeds"]:
        params, inputs = problem.make(sd)
        trials.append((f"seed {sd}", params, inputs))
    params, inputs = problem.make(job["seeds"][0])
    trials.append(("signed inputs", params, _signed(inputs, 1234)))
    details: dict[str, Any] = {"trials": [], "library_calls": declared, "frontend": "jax"}
    ops: set[str] = set()
    for label, params, inputs in trials:
        with jax.default_matmul_precision("highest"):  # fp32's meaning (on GPUs JAX's default is TF32-like)
            ref = [_torch(o) for o in _leaves(problem.model(params, *inputs))]
        r64 = _float64(problem, params, inputs)
        guard = AtenGuard()
        try:
            with guard:
                out = [_torch(o) for o in _leaves(fn(params, *inputs))]
        except Exception as e:  # noqa: BLE001 - candidate code may raise anything
            msg = str(e).strip().splitlines()
            raise Reject("runtime_error", f"model raised {type(e).__name__}: {msg[0] if msg else ''} ({label})") \
                from None
        ops |= set(guard.compute_ops())
        if len(out) != len(ref):
            raise Reject("wrong_outputs", f"{len(out)} outputs, the JAX reference has {len(ref)}")
        for i, (c, r) in enumerate(zip(out, ref)):
            res = compare(c, r, policy, r64[i] if r64 is not None and r64[i].shape == r.shape else None)
            details["trials"].append({"trial": label, "output": i, "ok": res.ok, "max_abs_err": res.max_abs_err,
                                      "ref_max_abs_err": res.ref_max_abs_err, "vs_float64": r64 is not None})
            if not res.ok:
                raise Reject("wrong_values", f"output {i} wrong on {label}: {res.reason}")
    bad = undeclared(sorted(ops), declared)
    if bad:
        raise Reject("undeclared_torch", f"model computes with torch ops it does not declare: {', '.join(bad[:5])}")
    return {"status": "accepted", "code": "ok",
            "reason": f"matches the JAX reference on {len(trials)} input sets", "details": details}
