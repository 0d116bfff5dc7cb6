"""Kernel IR data structures.

A kernel computes one output buffer over an iteration domain (one coordinate variable per output
dimension), and perhaps more of the same shape whose values it computes on the way (`Kernel.also`).
Its value is an expression tree: loads from buffers at index expressions, pointwise ops (named as in
the graph IR), integer index arithmetic, and reductions over extra variables
(`Reduce`; a `dot` reduction is a contraction). A schedule (`ir.kernel.schedule`, a value passed to
the renderer beside the kernel) parameterises how a backend tiles the domain; it never changes the value.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any


def row_major_strides(shape: Sequence[int]) -> tuple[int, ...]:
    """Element strides of a contiguous tensor of this shape."""
    out, acc = [], 1
    for d in reversed(shape):
        out.append(acc)
        acc *= d
    return tuple(reversed(out))


@dataclass(frozen=True)
class Buf:
    name: str
    shape: tuple[int, ...]
    dtype: str
    role: str = "tmp"  # input | param | output | tmp | const
    key: str = ""  # state_dict key for params

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    def strides(self) -> tuple[int, ...]:
        return row_major_strides(self.shape)


class Expr:
    dtype: str


@dataclass(frozen=True)
class Var(Expr):
    name: str
    extent: int
    dtype: str = "i64"


@dataclass(frozen=True)
class Const(Expr):
    value: Any
    dtype: str


@dataclass(frozen=True)
class Load(Expr):
    buf: Buf
    index: tuple[Expr, ...]
    mask: Expr | None = None  # where false, the load yields `other` and must not touch memory
    other: float = 0.0

    @property
    def dtype(self) -> str:  # type: ignore[override]
        return self.buf.dtype


@dataclass(frozen=True)
class Op(Expr):
    """A pointwise graph-IR op (`add`, `exp`, `gelu`, `where`, `cast`, ...) on element values."""

    op: str
    args: tuple[Expr, ...]
    attrs: tuple[tuple[str, Any], ...]
    dtype: str


@dataclass(frozen=True)
class IOp(Expr):
    """Integer index arithmetic and comparisons: + - * // % min max < <= == != and or."""

    op: str
    a: Expr
    b: Expr
    dtype: str = "i64"


@dataclass(frozen=True)
class Reduce(Expr):
    """Reduce `body` over `axes` (fresh variables): sum, max, min, prod, argmax, argmin, or dot (a
    sum of products whose operands are loads: the contraction of a GEMM)."""

    op: str
    body: Expr
    axes: tuple[Var, ...]
    dtype: str


@dataclass(frozen=True)
class Scan(Expr):
    """The inclusive prefix sum or product of `body` along `axis` (a fresh variable over the scanned
    dimension), read at position `at`: op over body[axis = j] for j <= at (j >= at when `reverse`).
    An exclusive scan is an inclusive one over a shifted body (see implicit.scan)."""

    op: str  # sum | prod
    body: Expr
    axis: Var
    at: Expr
    reverse: bool
    dtype: str


@dataclass(frozen=True, eq=False)
class Kernel:
    name: str
    kind: str  # pointwise | reduce | rownorm | matmul | scan
    out: Buf
    coords: tuple[Var, ...]
    expr: Expr
    group: int = -1  # the fusion group it came from
    # more outputs, each stored at the same coordinates: (buffer, a sub-expression of `expr` over the
    # coordinates alone), e.g. the mean inside a variance (`ir.kernel.siblings`)
    also: tuple[tuple[Buf, Expr], ...] = ()
    # the input whose storage `out` takes (`ir.kernel.inplace`): dead after this kernel, read only at
    # the output's own coordinates; "" for a fresh output
    in_place: str = ""

    def outs(self) -> list[Buf]:
        return [self.out, *(b for b, _ in self.also)]

    def inputs(self) -> list[Buf]:
        seen: dict[str, Buf] = {}
        for x in (self.expr, *(e for _, e in self.also)):
            for e in walk(x):
                if isinstance(e, Load) and e.buf.name not in seen:
                    seen[e.buf.name] = e.buf
        return list(seen.values())

    def reductions(self) -> list[Reduce]:
        return [e for e in walk(self.expr) if isinstance(e, Reduce)]

    def scans(self) -> list[Scan]:
        return [e for e in walk(self.expr) if isinstance(e, Scan)]


@dataclass
class LibraryCall:
    """An op left to a library (torch), declared in the plan and reported: convolutions, windows,
    scans, random ops and opaque ops until a generated kernel exists for them."""

    name: str
    op: str
    args: tuple[Buf | None, ...]
    attrs: dict[str, Any]
    out: Buf
    group: int = -1


@dataclass
class KernelProgram:
    name: str
    inputs: list[Buf]
    params: list[Buf]
    consts: dict[str, Any]  # const buffer name -> torch tensor
    steps: list[Kernel | LibraryCall]
    outputs: list[Buf]
    aliases: dict[str, str] = field(default_factory=dict)  # output buf -> the buffer it is (no copy)

    def kernels(self) -> list[Kernel]:
        return [s for s in self.steps if isinstance(s, Kernel)]

    def library_calls(self) -> list[LibraryCall]:
        return [s for s in self.steps if isinstance(s, LibraryCall)]


def children(e: Expr) -> tuple[Expr, ...]:
    if isinstance(e, Load):
        return e.index + ((e.mask,) if e.mask is not None else ())
    if isinstance(e, Op):
        return e.args
    if isinstance(e, IOp):
        return (e.a, e.b)
    if isinstance(e, Reduce):
        return (e.body,)
    if isinstance(e, Scan):
        return (e.body, e.at)
    return ()


class Rewrite:
    """A rewrite of an expression DAG: each shared node rewritten once, `_go` says how. The node is
    held beside its rewrite, so its id is not reused by a temporary of a later rewrite."""

    def __init__(self) -> None:
        self.memo: dict[int, tuple[Expr, Expr]] = {}

    def __call__(self, e: Expr) -> Expr:
        key = id(e)
        if key not in self.memo:
            self.memo[key] = (e, self._go(e))
        return self.memo[key][1]

    def _go(self, e: Expr) -> Expr:
        raise NotImplementedError

    def rebuild(self, e: Expr) -> Expr:
        """`e` with each child rewritten; `e` itself where no child changed (shared sub-trees stay shared)."""
        kids = children(e)
        new = tuple(self(c) for c in kids)
        if all(n is c for n, c in zip(new, kids)):
            return e
        if isinstance(e, Load):
            return replace(e, index=new[:len(e.index)], mask=new[-1] if e.mask is not None else None)
        if isinstance(e, Op):
            return replace(e, args=new)
        if isinstance(e, IOp):
            return replace(e, a=new[0], b=new[1])
        if isinstance(e, Reduce):
            return replace(e, body=new[0])
        assert isinstance(e, Scan)
        return replace(e, body=new[0], at=new[1])


def walk(e: Expr, skip: type | tuple[type, ...] = ()):
    """Every sub-expression once, children before parents (shared sub-trees visited once); nodes of the
    `skip` types (say Reduce: what a row's sweep evaluates, outside its reductions) and all below them
    are left out."""
    seen: set[int] = set()
    stack: list[tuple[Expr, bool]] = [(e, False)]
    while stack:
        cur, done = stack.pop()
        if done:
            yield cur
            continue
        if id(cur) in seen or isinstance(cur, skip):
            continue
        seen.add(id(cur))
        stack.append((cur, True))
        for c in reversed(children(cur)):
            stack.append((c, False))


def free_vars(e: Expr, memo: dict[int, frozenset[str]] | None = None) -> frozenset[str]:
    """Names of the variables `e` depends on (a reduction binds its own axes)."""
    memo = {} if memo is None else memo
    if id(e) in memo:
        return memo[id(e)]
    if isinstance(e, Var):
        r = frozenset([e.name])
    else:
        r = frozenset().union(*[free_vars(c, memo) for c in children(e)]) if children(e) else frozenset()
        if isinstance(e, Reduce):
            r = r - {v.name for v in e.axes}
        if isinstance(e, Scan):
            r = (free_vars(e.body, memo) - {e.axis.name}) | free_vars(e.at, memo)
    memo[id(e)] = r
    return r


def index_bounds(e: Expr, memo: dict[int, tuple[float, float]] | None = None) -> tuple[float, float]:
    """An interval holding every value of integer index arithmetic `e` (variables range over their
    extents); unbounded where it depends on loaded data. Backends use it to see where a quotient or
    remainder may take a negative operand (in lanes a mask discards, say)."""
    memo = {} if memo is None else memo
    if id(e) in memo:
        return memo[id(e)]
    inf = math.inf
    r: tuple[float, float] = (-inf, inf)
    if isinstance(e, Var):
        r = (0, e.extent - 1)
    elif isinstance(e, Const) and isinstance(e.value, (int, bool)):
        r = (int(e.value), int(e.value))
    elif isinstance(e, IOp):
        (a0, a1), (b0, b1) = index_bounds(e.a, memo), index_bounds(e.b, memo)
        if e.op == "+":
            r = (a0 + b0, a1 + b1)
        elif e.op == "-":
            r = (a0 - b1, a1 - b0)
        elif e.op == "*" and all(math.isfinite(x) for x in (a0, a1, b0, b1)):
            prods = [a0 * b0, a0 * b1, a1 * b0, a1 * b1]
            r = (min(prods), max(prods))
        elif e.op == "//" and b0 == b1 and b0 > 0:
            r = (math.floor(a0 / b0) if math.isfinite(a0) else a0, math.floor(a1 / b0) if math.isfinite(a1) else a1)
        elif e.op == "%" and b0 == b1 and b0 > 0:
            r = (0, min(a1, b0 - 1)) if a0 >= 0 else (-(b0 - 1), b0 - 1)
        elif e.op == "min":
            r = (min(a0, b0), min(a1, b1))
        elif e.op == "max" and _negation(e.b, e.a):
            r = (max(0, a0), max(abs(a0), abs(a1)))  # max(x, 0 - x) = |x|
        elif e.op == "max":
            r = (max(a0, b0), max(a1, b1))
        elif e.op in ("<", "<=", "==", "!=", ">=", ">", "and", "or"):
            r = (0, 1)
    memo[id(e)] = r
    return r


def _negation(b: Expr, a: Expr) -> bool:
    """Whether `b` is `0 - a`."""
    return isinstance(b, IOp) and b.op == "-" and isinstance(b.a, Const) and b.a.value == 0 and b.b == a


def _dims_of(e: Expr) -> list[Any]:
    if isinstance(e, Var):
        return [e.extent]
    if isinstance(e, Load):
        return list(e.buf.shape)
    if isinstance(e, Const):
        return [e.value]
    if isinstance(e, Op):
        return [v for _, a in e.attrs for v in (a if isinstance(a, tuple) else (a,))]
    if isinstance(e, Reduce):
        return [a.extent for a in e.axes]
    if isinstance(e, Scan):
        return [e.axis.extent]
    return []


def size_args(k: Kernel) -> tuple[str, ...]:
    """The run-time sizes (`ir.sym`, from --dynamic) a kernel's code reads: its extra arguments, sorted;
    empty for a kernel of static sizes."""
    found: set[str] = set()
    for d in [*k.out.shape, *(v.extent for v in k.coords), *(x for e in walk(k.expr) for x in _dims_of(e))]:
        syms = getattr(d, "symbols", None)
        if syms is not None and not isinstance(d, bool):
            found |= syms
    return tuple(sorted(found))
