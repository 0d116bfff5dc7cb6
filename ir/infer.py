"""Type inference: run the interpreter's own definition on meta tensors (no data, no memory)."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import torch

from .interp import EvalCtx, eval_op
from .types import TensorType, dtype_of


def _hashable(attrs: dict[str, Any]) -> tuple:
    return tuple(sorted(attrs.items()))


def infer_type(op: str, arg_types: list[TensorType | None], attrs: dict[str, Any]) -> TensorType:
    return _infer(op, tuple(arg_types), _hashable(attrs))


@lru_cache(maxsize=8192)
def _infer(op: str, arg_types: tuple[TensorType | None, ...], attrs: tuple) -> TensorType:
    if op in ("input", "param"):
        raise ValueError(f"{op} nodes carry their type explicitly")
    args = [torch.empty(t.shape, dtype=t.torch_dtype, device="meta") if t is not None else None
            for t in arg_types]
    try:
        out = eval_op(op, args, dict(attrs), EvalCtx(device="meta"))
    except NotImplementedError:
        # a few ops (data-dependent kernels) have no meta kernel: fall back to tiny real data
        args = [torch.zeros(t.shape, dtype=t.torch_dtype) if t is not None else None for t in arg_types]
        out = eval_op(op, args, dict(attrs), EvalCtx(device="cpu"))
    return TensorType(tuple(int(d) for d in out.shape), dtype_of(out.dtype))
