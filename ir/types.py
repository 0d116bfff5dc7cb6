"""Tensor types of the graph IR: shape, dtype and layout."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

# IR dtype names <-> torch dtypes; the IR text form uses the short names.
DTYPES: dict[str, torch.dtype] = {
    "f16": torch.float16,
    "bf16": torch.bfloat16,
    "f32": torch.float32,
    "f64": torch.float64,
    "i8": torch.int8,
    "i16": torch.int16,
    "i32": torch.int32,
    "i64": torch.int64,
    "u8": torch.uint8,
    "bool": torch.bool,
}
TORCH_TO_IR: dict[torch.dtype, str] = {v: k for k, v in DTYPES.items()}
FLOAT_DTYPES = ("f16", "bf16", "f32", "f64")
LAYOUTS = ("contiguous", "channels_last")


def dtype_of(t: torch.dtype) -> str:
    try:
        return TORCH_TO_IR[t]
    except KeyError:
        raise ValueError(f"dtype {t} is not supported by the akg IR") from None


@dataclass(frozen=True)
class TensorType:
    shape: tuple[int, ...]
    dtype: str
    layout: str = "contiguous"

    def __post_init__(self) -> None:
        if self.dtype not in DTYPES:
            raise ValueError(f"unknown dtype {self.dtype!r}")
        if self.layout not in LAYOUTS:
            raise ValueError(f"unknown layout {self.layout!r}")
        if any((not isinstance(d, int)) or d < 0 for d in self.shape):
            raise ValueError(f"bad shape {self.shape!r}")

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def torch_dtype(self) -> torch.dtype:
        return DTYPES[self.dtype]

    @property
    def itemsize(self) -> int:
        return torch.empty((), dtype=self.torch_dtype).element_size()

    @property
    def nbytes(self) -> int:
        return self.numel * self.itemsize

    def __str__(self) -> str:
        s = f"{self.dtype}[{','.join(map(str, self.shape))}]"
        return s if self.layout == "contiguous" else f"{s}@{self.layout}"

    @staticmethod
    def of(t: torch.Tensor) -> TensorType:
        return TensorType(tuple(int(d) for d in t.shape), dtype_of(t.dtype))
