"""512-bit loops where a kernel calls vector math: a schedule knob, `wide`. gcc vectorises for 256-bit
registers on AVX-512 hosts unless told otherwise (-mprefer-vector-width), and libmvec's 16-wide float
functions do twice the work a call of its 8-wide ones. Other loops keep 256 bits by default (a max-pooling
window ran slower at 512); `akg tune` tries the other width. A wide kernel's function is marked
`AKG_WIDE` (the prelude's macro: gcc's target attribute on AVX-512 hosts, nothing elsewhere), which the
OpenMP regions outlined from it inherit."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from hardware_models.spec import HardwareModel
from ir.kernel.ir import Kernel, Op, walk
from ir.kernel.schedule import Schedule

from ..base import Template
from .style import STYLE, VECTOR_MATH

WIDE_LANES = 16  # floats in a 512-bit register: hosts with fewer have no wider loops to ask for


def vector_math(k: Kernel) -> bool:
    """Whether the kernel calls a float function libmvec has vector versions of."""
    exprs = [k.expr, *(e for _, e in k.also)]
    return any(isinstance(x, Op) and x.op in VECTOR_MATH and STYLE.ctype_compute(x.dtype) == "float"
               for e in exprs for x in walk(e))


def with_width(t: Template, lanes: Callable[[HardwareModel], int]) -> Template:
    """`t` with the `wide` knob: set by default for a kernel with vector math on a host of 16-float
    vectors; its space takes the default's width, then the default at the other width."""
    def default(k: Kernel, target: HardwareModel) -> Schedule:
        s = t.default(k, target)
        return s.replace(wide=1) if lanes(target) >= WIDE_LANES and vector_math(k) else s

    def space(k: Kernel, target: HardwareModel) -> list[Schedule]:
        if lanes(target) < WIDE_LANES:
            return t.space(k, target)
        first = default(k, target)
        wide = bool(first.get("wide"))
        return [s.replace(wide=1) if wide else s for s in t.space(k, target)] + [first.replace(wide=int(not wide))]

    return dataclasses.replace(t, default=default, space=space)
