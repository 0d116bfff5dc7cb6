"""Triton launches inside a module's forward, as torch.export sees them: while a problem is exported,
`kernel[grid](...)` goes through torch's `wrap_triton`, so each launch is one
`triton_kernel_wrapper_mutation` node (its kernel, grid and arguments); `lift_launch` turns that node into
the new values of the tensors the kernel writes."""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import math
import sys
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch

from ..convert import LiftCtx, source_line
from ..errors import AkgError
from ..graph import Node
from ..types import DTYPES
from . import gemm, ttir, views
from .execute import Executor
from .values import Launch, Num, Ptr

HOP = "triton_kernel_wrapper_mutation"
_TTIR_CACHE: dict[tuple, str] = {}


def resolve(kernel: Any, args: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """The `triton.jit` function behind autotune / heuristics wrappers (the first autotune config, whose
    meaning is every config's) and the arguments they add."""
    from triton.runtime.autotuner import Autotuner, Heuristics
    from triton.runtime.jit import JITFunction

    while not isinstance(kernel, JITFunction):
        if isinstance(kernel, Autotuner):
            if kernel.configs:
                args = {**args, **kernel.configs[0].kwargs}
            kernel = kernel.fn
        elif isinstance(kernel, Heuristics):
            for k, f in kernel.values.items():
                args = {**args, k: f(args)}
            kernel = kernel.fn
        elif hasattr(kernel, "fn") and callable(kernel.fn) and type(kernel).__name__ == "InterpretedFunction":
            kernel = _as_jit(kernel.fn, JITFunction)
        else:
            raise AkgError(f"cannot lift a launch of {type(kernel).__name__}: not a triton.jit kernel")
    return kernel, args


_JITTED: dict[Any, Any] = {}


def _as_jit(fn: Any, jit: Any) -> Any:
    """A `triton.jit` function for one the interpreter made (TRITON_INTERPRET=1 at import). Its hash is
    set from its source: Triton's dependency walk rejects the interpreter's helpers it calls."""
    if fn not in _JITTED:
        j = jit(fn)
        j.hash = hashlib.sha256(j.src.encode()).hexdigest()
        _JITTED[fn] = j
    return _JITTED[fn]


@contextlib.contextmanager
def captured() -> Iterator[None]:
    """While exporting: `kernel[grid](...)` becomes torch's traceable `wrap_triton` launch."""
    if "triton" not in sys.modules:  # the problem did not import Triton: nothing to capture
        yield
        return
    from triton.runtime import interpreter, jit

    def getitem(self: Any, grid: Any) -> Any:
        def launch(*args: Any, **kwargs: Any) -> Any:
            fn, named = resolve(self, {**dict(zip(_arg_names(self), args)), **kwargs})
            named = {k: v for k, v in named.items() if k in fn.arg_names}
            return torch.library.wrap_triton(fn)[grid](**named)
        return launch

    saved = [(cls, cls.__dict__.get("__getitem__")) for cls in (jit.KernelInterface, interpreter.InterpretedFunction)]
    for cls, _ in saved:
        cls.__getitem__ = getitem
    try:
        yield
    finally:
        for cls, old in saved:
            if old is None:
                del cls.__getitem__
            else:
                cls.__getitem__ = old


def _arg_names(kernel: Any) -> list[str]:
    while not hasattr(kernel, "arg_names"):
        kernel = kernel.fn
    return list(kernel.arg_names)


def lift_launch(cx: LiftCtx, kernel_idx: int, constant_args_idx: int, grid: list[Any], kwargs: dict[str, Any],
                fx_args: dict[str, Any], **_: Any) -> dict[str, Node]:
    """The launch's writes: argument name -> the tensor's value after the kernel."""
    from torch._higher_order_ops.triton_kernel_wrap import kernel_side_table

    kernel = kernel_side_table.get_kernel(kernel_idx)
    args = {**kernel_side_table.get_constant_args(constant_args_idx), **kwargs}
    fn, args = resolve(kernel, args)
    where = source_line(cx.fx_node) if cx.fx_node is not None else "?"
    name = fn.__name__ if hasattr(fn, "__name__") else str(fn)
    tensors = {k: v for k, v in args.items() if isinstance(v, Node)}
    for k in tensors:
        val = fx_args[k].meta.get("val") if hasattr(fx_args.get(k), "meta") else None
        if isinstance(val, torch.Tensor) and (not val.is_contiguous() or val.storage_offset() != 0):
            raise AkgError(f"cannot lift Triton kernel {name} ({where}): its argument {k} is a strided view; "
                           "pass a contiguous tensor (.contiguous()) to the kernel")
    constants = {k: v for k, v in args.items() if k not in tensors and k in fn.arg_names}
    g = tuple(int(x) for x in (grid[0] if isinstance(grid, list) else grid))
    pointers = {k: ttir.POINTER[str(DTYPES[v.dtype]).removeprefix("torch.")] for k, v in tensors.items()}
    key = (id(fn), tuple(sorted(pointers.items())), tuple(sorted((k, repr(v)) for k, v in constants.items())))
    if key not in _TTIR_CACHE:
        try:
            _TTIR_CACHE[key] = ttir.generate(fn, pointers, constants)
        except Exception as e:  # noqa: BLE001 - Triton's front end raises many kinds
            lines = [x for x in str(e).strip().splitlines() if x.strip()]
            raise AkgError(f"Triton's front end could not compile kernel {name} ({where}): "
                           f"{lines[-1] if lines else type(e).__name__}") from None
    ptr_args, body = ttir.parse(_TTIR_CACHE[key])
    launch = Launch(name, g, tensors, where)
    cx = dataclasses.replace(cx, hint=name.removesuffix("_kernel"))  # nodes named after the kernel
    ex = Executor(cx, launch)
    for p in ptr_args:
        ex.env["%" + p] = Ptr(p, Num(np.zeros((1,) * len(ex.grid), dtype=np.int64), "i64"))
    try:
        ex.run(body)
    except (AkgError, RecursionError, MemoryError):
        raise
    except Exception as e:  # noqa: BLE001 - an op this lifter mis-reads must still be one line
        raise ex.fail(f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}") from e
    out: dict[str, Node] = {}
    for arg, writes in launch.writes.items():
        cur = tensors[arg]
        for w in writes:
            val = ex.node(w.val)
            if val.type.rank < w.off.ndim:
                val = cx.add("reshape", [val], shape=[1] * (w.off.ndim - val.type.rank) + list(val.shape))
            if val.dtype != cur.dtype:
                val = cx.add("cast", [val], dtype=cur.dtype)
            whole = None if w.atomic or len(writes) > 1 else \
                gemm.whole(cx, tensors, cur, w.off, w.mask, val, f"Triton kernel {name} ({where})")
            cur = whole if whole is not None else \
                views.written(cx, cur, w.off, w.mask, val, w.atomic, f"Triton kernel {name} ({where})")
        out[arg] = cur
    cx.graph.meta.setdefault("ported", []).append(
        {"kernel": name, "grid": list(g), "writes": sorted(out), "programs": math.prod(g)})
    return out
