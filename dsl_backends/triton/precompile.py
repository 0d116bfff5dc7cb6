"""A Triton candidate's kernels compiled in parallel before its first trial.

Triton compiles a kernel at its first launch, one after another: a model's module of 60 kernels spent
11-14 s of its first verification on the H200 compiling them in turn. Here the candidate's forward runs
once with Triton's `jit_cache_hook` answering every compile: nothing is compiled or launched, and each
kernel's specialization (signature, constants, alignment attributes, options: what Triton's own cache key
is made of, recorded as Triton's `preload` reads it) is kept. Forked children then compile them into
Triton's cache, a share each, and the first trial finds every kernel there.

Nothing here decides a verdict: the pass's outputs are discarded, a kernel a child did not compile is
compiled at its launch as before, and the trials run the candidate as they always do. The pass runs
only for plain `@triton.jit` kernels (an autotuner would time the skipped launches and keep a choice
made on nothing), on fresh inputs, with the module's buffers restored after it (a library call may
update them), and integer outputs of skipped kernels zeroed (garbage indices in a library gather would
fault the device)."""

from __future__ import annotations

import json
import os
import sys
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import torch

MIN_KERNELS = 4  # fewer: forking costs more than it saves


def _kernels(mod: Any) -> list[Any] | None:
    """The module's Triton kernels, or None where it has none or wraps one (autotune, heuristics)."""
    if "triton" not in sys.modules:
        return None
    from triton.runtime.jit import JITFunction, KernelInterface

    found = [v for v in vars(mod).values() if isinstance(v, KernelInterface)]
    if not found or any(not isinstance(v, JITFunction) for v in found):
        return None
    return found


def _storages(ts: list[Any]) -> set[int]:
    return {t.untyped_storage().data_ptr() for t in ts if isinstance(t, torch.Tensor)}


def record(mod: Any, cand: torch.nn.Module, inputs: list[Any]) -> list[tuple[Any, dict[str, Any]]]:
    """(kernel, Triton's compile arguments) for each distinct kernel specialization one forward launches,
    none of them compiled or launched."""
    return list(_recorded(mod, cand, inputs).values())


def _recorded(mod: Any, cand: torch.nn.Module, inputs: list[Any]) -> dict[str, tuple[Any, dict[str, Any]]]:
    """`record`'s specializations by Triton's cache key."""
    from triton import knobs

    kernels = _kernels(mod)
    if kernels is None:
        return {}
    seen: dict[str, tuple[Any, dict[str, Any]]] = {}

    def hook(*, key: Any, fn: Any, compile: dict[str, Any], **_: Any) -> bool:
        seen.setdefault(f"{id(fn.jit_function)}:{key}", (fn.jit_function, compile))
        return True  # handled: Triton neither compiles nor launches it

    kept = _storages([*inputs, *cand.state_dict().values()])

    def zero_ints(*args: Any, **kwargs: Any) -> None:
        for a in (*args, *kwargs.values()):
            if isinstance(a, torch.Tensor) and not a.is_floating_point() and a.untyped_storage().data_ptr() not in kept:
                a.zero_()

    buffers = {k: v.clone() for k, v in cand.named_buffers()}
    before = knobs.runtime.jit_cache_hook
    knobs.runtime.jit_cache_hook = hook
    for k in kernels:
        k.pre_run_hooks.append(zero_ints)
    try:
        with torch.no_grad():
            cand(*inputs)
    except Exception:  # noqa: BLE001 - the trials report a failing forward; what was seen still compiles
        pass
    finally:
        knobs.runtime.jit_cache_hook = before
        for k in kernels:
            k.pre_run_hooks.remove(zero_ints)
        with torch.no_grad():
            for k, v in cand.named_buffers():
                if k in buffers:
                    v.copy_(buffers[k])
        if torch.cuda.is_available():
            torch.cuda.synchronize()
    return seen


def _compile(fn: Any, comp: dict[str, Any]) -> None:
    """One kernel and its launcher compiled into Triton's cache as its launch would compile them (Triton's
    `preload`, less the device query a forked child must not make)."""
    _, _, target, backend, _ = fn.device_caches[comp["device"]]
    data = json.loads(comp["specialization_data"])
    options = backend.parse_options({k: tuple(v) if isinstance(v, list) else v for k, v in data["options"].items()})
    src = fn.ASTSource(fn, comp["signature"], comp["constants"], comp["configs"][0])
    kernel = fn.compile(src, target=target, options=options.__dict__)
    from triton.runtime.driver import driver

    driver.active.launcher_cls(kernel.src, kernel.metadata)  # its launcher's C module, built into the cache


def compile_all(specs: list[tuple[Any, dict[str, Any]]], workers: int | None = None) -> dict[str, Any]:
    """`specs` compiled by forked children, a share each (the parent compiles nothing)."""
    n = min(len(specs), workers or max(1, (os.cpu_count() or 2) - 1), 16)
    pids = []
    for i in range(n):
        with warnings.catch_warnings():  # the worker has threads (CUDA's, torch's): the children use none
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
        if pid == 0:  # the child: no CUDA call, no Python exit handlers, only its share
            code = 0
            try:
                for fn, comp in specs[i::n]:
                    _compile(fn, comp)
            except BaseException:  # noqa: BLE001 - the launch compiles it again and reports the error
                code = 1
            os._exit(code)
        pids.append(pid)
    failed = sum(1 for pid in pids if os.waitpid(pid, 0)[1] != 0)
    return {"kernels": len(specs), "processes": n, "failed_processes": failed}


def precompile(mod: Any, cand: torch.nn.Module, make_inputs: Sequence[Callable[[], list[Any]]]
               ) -> dict[str, Any] | None:
    """The candidate's Triton kernels compiled in parallel (None where there is nothing to gain). `make_inputs`:
    an input set per size the trials run (a --dynamic module's buckets launch kernels of their own
    schedules: recorded at one size only, the other sizes' kernels compiled one by one at their first launch,
    6.5 s of a Mixtral expert graph's 7.9 s verification on the H200)."""
    if _kernels(mod) is None:
        return None
    found: dict[str, tuple[Any, dict[str, Any]]] = {}
    for make in make_inputs:
        for k, spec in _recorded(mod, cand, make()).items():
            found.setdefault(k, spec)
    specs = list(found.values())
    if len(specs) < MIN_KERNELS:
        return {"kernels": len(specs), "processes": 0, "failed_processes": 0}
    return compile_all(specs)
