"""Operand layout for split-precision GEMMs: an fp32 `matmul(a, b)` whose B is row-major [K, N] becomes
`linear(a, bT)` with B transposed once into a K-major copy ([N, K]). Tensor cores take 32-bit
operands K-major only (there is no transposing shared-memory load for them as there is for 16-bit
ones), so a 3xTF32 GEMM over an N-major B is held back by its B tiles; the copy costs one pass over
B. A B that is itself a transpose (`x.T`) is read through, with no copy. GEMMs with few rows are
left alone (they stream B once, and a copy would triple that traffic), as are shallow ones (K or N
small: bound by writing the output, where the ranking picks an FMA tile that wants B row-major)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..graph import Node
from .base import P, RewritePass, Rewriter, Rule, X, register
from .library import LIBRARY_MARK

MIN_ROWS = 256  # below this a GEMM is bound by reading B, which the copy would read twice more
MIN_DEPTH = 128  # K and N at least this: shallower GEMMs are bound by their output, and an FMA tile
# (what the ranking picks there) reads a K-major B across its rows


def _kmajor(r: Rewriter, b: dict[str, Node]) -> Node | None:
    mm, a, w = r.root, b["a"], b["b"]
    if mm.meta.get(LIBRARY_MARK) or a.type.rank != 2 or w.type.rank != 2 or mm.type.dtype != "f32" \
            or a.type.shape[0] < MIN_ROWS or min(w.type.shape) < MIN_DEPTH:
        return None
    if w.op == "permute" and w.args[0] is not None and list(w.attrs["dims"]) == [1, 0]:
        wt = w.args[0]  # already K-major underneath: read it as the linear's weight, no copy
    else:
        wt = r.op("permute", [w], dims=[1, 0])
    return r.op("linear", [a, wt])


@register
@dataclass(frozen=True)
class KMajorOperands(RewritePass):
    """fp32 2-D GEMMs with at least MIN_ROWS rows, K and N at least MIN_DEPTH, as `linear` over a K-major B
    (see the module text)."""

    name: ClassVar[str] = "kmajor"
    rules: ClassVar[tuple[Rule, ...]] = (Rule("matmul-as-linear", P("matmul", X("a"), X("b")), _kmajor),)
