"""The executor's values: what is known at lift time (`Num`), what becomes graph nodes (`Sym`), pointers
into a launch's tensors (`Ptr`), and the stores a launch makes (`Write`)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..graph import Node
from . import ttir

IR_DTYPE = {"f32": "f32", "f16": "f16", "bf16": "bf16", "f64": "f64", "i1": "bool", "i8": "i8", "i16": "i16",
             "i32": "i32", "i64": "i64"}


@dataclass
class Num:
    a: np.ndarray  # the grid's axes, then the block's; size 1 where it does not vary
    elem: str


@dataclass
class Sym:
    n: Node
    elem: str
    # a block row longer than the tensor's: `n` holds the tensor's part, the rest of `full` holds `fill`
    # (the masked load's `other`, carried through the ops after it); a reduction whose identity is `fill`
    # reads `n` alone, and only an op that needs the whole block pads it (`padded`)
    pad: tuple[tuple[int, ...], float] | None = None
    padded: Node | None = None


@dataclass
class Ptr:
    arg: str
    off: Num | Sym


Value = Num | Sym | Ptr


@dataclass
class Write:
    off: np.ndarray
    val: Num | Sym
    mask: np.ndarray
    atomic: bool = False


@dataclass
class Launch:
    """What the executor needs of one launch: the kernel's pointer arguments' current values (flat graph
    nodes), the grid, and where in the problem file the launch is (for errors)."""
    name: str
    grid: tuple[int, ...]
    tensors: dict[str, Node]
    where: str
    writes: dict[str, list[Write]] = field(default_factory=dict)
    unrolled: int = 0


def block_of(op: ttir.Op) -> tuple[int, ...]:
    return ttir.shape(op.result_type.split(", ")[0])


def elem_of(op: ttir.Op) -> str:
    return ttir.element(op.result_type.split(", ")[0])
