"""Shared helpers for renderers: free variables, constants, and a temporaries printer that walks an
expression tree once and names each non-trivial node."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ir.kernel.analysis import row_split
from ir.kernel.ir import Const, Expr, IOp, Kernel, Load, Op, Reduce, Scan, Var, free_vars, walk
from ir.sym import is_dynamic
from ir.types import FLOAT_DTYPES

from .base import UnsupportedKernel

FLOATS = FLOAT_DTYPES
# CUDA's limit on a grid's y and z extents (x allows 2^31 - 1): a GEMM's batch or row tiles beyond it
# fold into x, each block decoding its (column tile, row tile, batch) from its x index
MAX_GRID_YZ = 65535


def fold_grid(s: Mapping[str, Any], *extents: int) -> bool:
    """Whether a launch whose y/z extents are `extents` folds them into x (the schedule's MAX_GRID_YZ,
    which a test lowers to run the folded path at small sizes)."""
    return max(extents, default=1) > int(s.get("MAX_GRID_YZ", MAX_GRID_YZ))


def py_const(value: Any, dtype: str) -> str:
    if dtype == "bool":
        return "True" if value else "False"
    if dtype in FLOATS:
        v = float(value)
        if math.isnan(v):
            return 'float("nan")'
        if math.isinf(v):
            return 'float("inf")' if v > 0 else 'float("-inf")'
        return repr(v)
    return str(value if is_dynamic(value) else int(value))  # a run-time size stays its expression


class Printer:
    """Emits `name = code` lines for an expression DAG, children first; `render` gives the code."""

    def __init__(self, render: Callable[[Expr, Printer], str], prefix: str = "t", dedupe: bool = False) -> None:
        self._render = render
        self.lines: list[str] = []
        self.names: dict[int, str] = {}
        self.prefix = prefix
        self.fixed: dict[int, str] = {}  # expressions bound to a name by the template (accumulators)
        # with `dedupe`, equal code gets one name: a row template binds a reduction's axes and the
        # output's columns to the same names, so a row loaded for a reduction is reused by the output
        self.by_code: dict[str, str] | None = {} if dedupe else None

    def __call__(self, e: Expr) -> str:
        if id(e) in self.fixed:
            return self.fixed[id(e)]
        if id(e) in self.names:
            return self.names[id(e)]
        code = self._render(e, self)
        if isinstance(e, (Var, Const)) or (isinstance(e, IOp) and len(code) < 24):
            return code
        if self.by_code is not None and code in self.by_code:
            self.names[id(e)] = self.by_code[code]
            return self.by_code[code]
        name = f"{self.prefix}{len(self.names)}"
        self.names[id(e)] = name
        self.lines.append(f"{name} = {code}")
        if self.by_code is not None:
            self.by_code[code] = name
        return name


__all__ = ["FLOATS", "Printer", "free_vars", "py_const", "Load", "Op", "Reduce", "IOp", "Const", "Var"]


def comp(dtype: str) -> str:
    """Arithmetic type: half types compute in fp32 (bf16 arithmetic is also wrong in Triton's interpreter)."""
    return "f32" if dtype in ("f16", "bf16") else dtype


def pow2(n: int) -> int:
    """The smallest power of two >= n (1 for n <= 1)."""
    return 1 << max(0, (n - 1).bit_length())


@dataclass
class RowReduction:
    """How a tile template folds a reduce kernel: each output row reduces `red` elements, `br` at a time
    (`single`: one tile holds the whole row; otherwise a loop over chunks)."""

    reds: list[Reduce]  # children first: an inner reduction comes before the one that uses it
    red: int
    rows: int
    br: int
    nested: bool
    single: bool


def row_reduction(k: Kernel, sched: Mapping[str, Any], max_single: int, chunked_ok: tuple[str, ...] = (
        "sum", "dot", "max", "min", "prod"), nested_ok: bool = False) -> RowReduction:
    """The common frame of the tile templates' reductions; refuses what no chunk loop can fold (ops
    outside `chunked_ok`, and nested reductions unless the template sweeps once per nesting level:
    `nested_ok`) when the row is longer than one tile."""
    reds = k.reductions()
    extents = {math.prod(v.extent for v in r.axes) for r in reds}
    if len(extents) != 1:
        raise UnsupportedKernel("reductions of different extents in one kernel")
    red = extents.pop()
    br = sched.get("BR") or min(pow2(red), max_single)
    nested = any(isinstance(x, Reduce) for r in reds for x in walk(r.body) if x is not r)
    single = pow2(red) <= br
    if not single and ((nested and not nested_ok) or any(r.op not in chunked_ok for r in reds)):
        raise UnsupportedKernel(f"a nested or {'/'.join(sorted({r.op for r in reds}))} reduction longer than one tile")
    return RowReduction(reds, red, k.out.numel, br, nested, single)


def py_decode(names: list[tuple[str, int]], flat: str, lines: list[str], env: dict[str, str]) -> None:
    """Bind variables (name, extent), row-major, from a flat index expression, as Python assignments
    (the Python-embedded DSLs: Triton, Pallas, TileLang)."""
    stride = 1
    for name, ext in reversed(names):
        env[name] = name
        lines.append(f"{name} = ({flat} // {stride}) % {ext}" if stride > 1 else f"{name} = {flat} % {ext}")
        stride *= ext


def row_coords(k: Kernel) -> tuple[tuple[Var, ...], list[tuple[str, int]]]:
    """A row-fused ("rownorm") kernel's row coordinates (every reduction depends on these alone;
    size-1 axes ride along) and its column coordinates (name, extent)."""
    rs = row_split(k)
    if rs is None:
        raise UnsupportedKernel("not a row-fused kernel")
    row_c = tuple(v for v in k.coords if v in rs[0] or v.extent == 1)
    return row_c, [(v.name, v.extent) for v in k.coords if v not in row_c]


def rows_lead(k: Kernel) -> bool:
    """Whether a row-fused kernel's row coordinates lead its output's: its row r at r x (its columns)."""
    row_c, _ = row_coords(k)
    return tuple(k.coords[:len(row_c)]) == row_c


def row_count(k: Kernel) -> int:
    """How many rows a row-fused kernel has (its launch grid's extent, in rows)."""
    return math.prod(v.extent for v in row_coords(k)[0])


def row_longest(k: Kernel) -> int:
    """A row-fused kernel's longest row: its longest reduction or its output's columns (a tile's width)."""
    return max([math.prod(v.extent for v in r.axes) for r in k.reductions()]
               + [math.prod(e for _, e in row_coords(k)[1])])


def bind_row_axes(axes: tuple[Var, ...], cols: list[tuple[str, int]], env: dict[str, str], lines: list[str],
                  j: str, masks: list[tuple[frozenset[str], str]]) -> None:
    """A row template's reduction axes bound in `env` (Python-spelled templates): a reduction over the
    output's column shape shares the column names (and so its loads, under "cmask"); any other is decoded
    from `j` under a mask of its extent."""
    named = [(a.name, a.extent) for a in axes]
    ext = math.prod(e for _, e in named)
    if [e for _, e in named] == [e for _, e in cols] and all(c in env for c, _ in cols):
        for (name, _), (c, _) in zip(named, cols):
            env[name] = env[c]
        masks.append((frozenset(nm for nm, _ in named), "cmask"))
        return
    mask = f"jm{ext}"
    if mask not in {m for _, m in masks}:
        lines.append(f"{mask} = {j} < {ext}")
    py_decode(named, j, lines, env)
    masks.append((frozenset(nm for nm, _ in named), mask))


def reads_along(e: Expr, name: str) -> bool:
    """Whether every load of `e` from a buffer of more than one axis has `name` as its innermost index:
    then `e` reads neighbouring elements as `name` steps (a GEMM operand stored transposed, or not)."""
    loads = [x for x in walk(e) if isinstance(x, Load) and len(x.index) > 1]
    return bool(loads) and all(isinstance(x.index[-1], Var) and x.index[-1].name == name for x in loads)


def strided_reduction(k: Kernel) -> bool:
    """True when the kernel's reductions read along a non-contiguous axis: every multi-axis load inside
    a reduction has an output coordinate, not a reduced axis, as its innermost index (a sum over a
    middle axis, an RMS norm over channels). Neighbouring outputs then read neighbouring elements."""
    coords = {v.name for v in k.coords}
    loads = [e for r in k.reductions() for e in walk(r.body) if isinstance(e, Load) and len(e.index) > 1]
    return bool(loads) and all(isinstance(e.index[-1], Var) and e.index[-1].name in coords for e in loads)


def scan_rows(k: Kernel) -> tuple[Scan, list[Var]]:
    """A scan kernel's one scan (read at its own output position), and the output coordinates other than
    that position (the rows); an UnsupportedKernel otherwise."""
    scans = k.scans()
    if len(scans) != 1 or not isinstance(scans[0].at, Var) or scans[0].at not in k.coords:
        raise UnsupportedKernel("a scan kernel needs one scan read at its own output position")
    return scans[0], [v for v in k.coords if v != scans[0].at]
