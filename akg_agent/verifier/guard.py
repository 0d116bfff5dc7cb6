"""A dispatch-mode guard that lists every ATen op run inside `ModelNew.forward`.

Kernels launched by Triton, ctypes or a custom-op library never reach the ATen dispatcher, so what
the guard sees is torch doing the work itself. Allocation, views and copies are not compute."""

from __future__ import annotations

import fnmatch
from collections import Counter
from typing import Any

from torch.utils._python_dispatch import TorchDispatchMode

NOT_COMPUTE = {
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "zeros", "zeros_like", "zero_",
    "fill_", "ones", "ones_like", "full", "full_like", "new_zeros", "new_full", "new_ones", "view", "_unsafe_view",
    "reshape", "as_strided", "expand", "permute", "transpose", "t", "unsqueeze", "squeeze", "slice", "select",
    "narrow", "contiguous", "clone", "copy_", "detach", "alias", "lift_fresh", "lift_fresh_copy", "_to_copy",
    "to", "view_as", "unbind", "split", "chunk", "flatten", "unflatten", "resize_", "set_", "sym_size",
    "sym_stride", "sym_numel", "sym_storage_offset", "size", "stride", "is_contiguous", "is_pinned", "numel", "dim",
    "_local_scalar_dense", "item", "record_stream", "_has_compatible_shallow_copy_type",
}


def op_name(func: Any) -> str:
    """'aten.mm.default' style names, as in torch.export graphs."""
    return str(func)


def is_compute(name: str) -> bool:
    parts = name.split(".")
    if parts[0] != "aten":
        return False  # custom-op namespaces are the candidate's own kernels
    return parts[1] not in NOT_COMPUTE


class AtenGuard(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.calls: Counter[str] = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[override]
        self.calls[op_name(func)] += 1
        return func(*args, **(kwargs or {}))

    def compute_ops(self) -> list[str]:
        return sorted(n for n in self.calls if is_compute(n))


def undeclared(compute_ops: list[str], declared: list[str]) -> list[str]:
    """Compute ops the candidate did not declare as library calls ('aten.convolution' covers every
    overload of it; 'aten.max_pool*' is a pattern)."""
    def covered(op: str) -> bool:
        return any(op == d or op.startswith(d.rstrip(".") + ".") or fnmatch.fnmatchcase(op, d) for d in declared)
    return [op for op in compute_ops if not covered(op)]
