"""A dispatch-mode guard that lists every ATen op run inside `ModelNew.forward`.

Kernels launched by Triton, ctypes or a custom-op library never reach the ATen dispatcher, so what
the guard sees is torch doing the work itself. Allocation, views and copies are not compute."""

from __future__ import annotations

import fnmatch
import math
from collections import Counter
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

NOT_COMPUTE = {
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "zeros", "zeros_like", "zero_",
    "fill_", "ones", "ones_like", "full", "full_like", "new_zeros", "new_full", "new_ones", "view", "_unsafe_view",
    "reshape", "as_strided", "expand", "permute", "transpose", "t", "unsqueeze", "squeeze", "slice", "select",
    "narrow", "contiguous", "clone", "copy_", "detach", "alias", "lift_fresh", "lift_fresh_copy", "_to_copy",
    "to", "view_as", "unbind", "split", "chunk", "flatten", "unflatten", "resize_", "set_", "sym_size",
    "sym_stride", "sym_numel", "sym_storage_offset", "size", "stride", "is_contiguous", "is_pinned", "numel", "dim",
    "_local_scalar_dense", "item", "record_stream", "_has_compatible_shallow_copy_type",
    # in-place views: a tensor's metadata changed, no value computed (a library GRU transposes its input so)
    "transpose_", "t_", "squeeze_", "unsqueeze_", "as_strided_", "swapaxes_", "swapdims_", "detach_",
}


def op_name(func: Any) -> str:
    """'aten.mm.default' style names, as in torch.export graphs."""
    return str(func)


def is_compute(name: str) -> bool:
    parts = name.split(".")
    if parts[0] != "aten":
        return False  # custom-op namespaces are the candidate's own kernels
    return parts[1] not in NOT_COMPUTE


# Allocations whose contents are undefined: the guard can fill them with a poison value.
UNINITIALISED = {"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "empty_permuted"}


class AtenGuard(TorchDispatchMode):
    """`poison`: fill every uninitialised allocation with this value (integers: the dtype's max for
    NaN, else its min; booleans: True for NaN), so an output the candidate never writes reads the
    poison whatever the allocator hands out (poisoning freed blocks is not enough: large CPU blocks
    come fresh from mmap, small ones keep the allocator's bookkeeping)."""

    def __init__(self, poison: float | None = None) -> None:
        super().__init__()
        self.calls: Counter[str] = Counter()
        self.poison = poison

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[override]
        name = op_name(func)
        self.calls[name] += 1
        out = func(*args, **(kwargs or {}))
        if self.poison is not None and name.split(".")[1] in UNINITIALISED and isinstance(out, torch.Tensor):
            _fill_poison(out, self.poison)
        return out

    def compute_ops(self) -> list[str]:
        return sorted(n for n in self.calls if is_compute(n))


def _fill_poison(t: torch.Tensor, value: float) -> None:
    if t.numel() == 0:
        return
    if t.dtype == torch.bool:
        t.fill_(math.isnan(value))
    elif t.is_floating_point():
        t.fill_(value if math.isnan(value) else max(value, torch.finfo(t.dtype).min))  # half overflows
    elif t.is_complex():
        t.fill_(value)
    else:
        info = torch.iinfo(t.dtype)
        t.fill_(info.max if math.isnan(value) else info.min)


def undeclared(compute_ops: list[str], declared: list[str]) -> list[str]:
    """Compute ops the candidate did not declare as library calls ('aten.convolution' covers every
    overload of it; 'aten.max_pool*' is a pattern)."""
    def covered(op: str) -> bool:
        return any(op == d or op.startswith(d.rstrip(".") + ".") or fnmatch.fnmatchcase(op, d) for d in declared)
    return [op for op in compute_ops if not covered(op)]
