"""A kernel's structure: what it computes and how it reads memory, up to names and where in a buffer a
fixed-position read starts. Kernels of one structure share a tuned schedule: the steps of an unrolled
recurrence (an LSTM's per-step GEMM and gates differ only in their buffers' names and in the step that
a fixed index selects), or three projections of one shape.

The key names buffers and variables by their first appearance and keeps every shape, dtype, op, attribute
and constant, except an index that is a constant into a dimension of a buffer (`xs[t]`): it moves where
the read starts, not the access pattern, so the key keeps only that start's alignment (its byte offset
modulo ALIGN_BYTES), which is what can change a kernel's speed."""

from __future__ import annotations

from typing import Any

from ir.types import DTYPES

from .ir import Buf, Const, Expr, IOp, Kernel, Load, Op, Reduce, Scan, Var

# a read's start is known by its offset modulo this: wider than any vector load or cache line it starts
ALIGN_BYTES = 128


class _Namer:
    def __init__(self) -> None:
        self.bufs: dict[str, str] = {}
        self.vars: dict[str, str] = {}
        self.seen: dict[int, tuple[Expr, str]] = {}  # a node of the DAG met before -> its tag (the node held)

    def buf(self, b: Buf) -> str:
        name = self.bufs.setdefault(b.name, f"b{len(self.bufs)}")
        # a const buffer's values are baked into the module and a param's may be packed once (a GEMM's
        # weights); inputs, outputs and intermediates are all pointers alike
        role = f":{b.role}" if b.role in ("const", "param") else ""
        return f"{name}:{b.dtype}{list(b.shape)}{role}"

    def var(self, v: Var) -> str:
        return f"{self.vars.setdefault(v.name, f'v{len(self.vars)}')}:{v.extent}"

    def expr(self, e: Expr) -> str:
        """A node shared in the DAG is written once, then referred to by its tag: the text stays the size
        of the DAG, and two kernels of one key share alike."""
        if id(e) in self.seen:
            return self.seen[id(e)][1]
        text = self._text(e)
        if not isinstance(e, (Var, Const)):
            self.seen[id(e)] = (e, f"#{len(self.seen)}")
            text = f"#{len(self.seen) - 1}={text}"
        return text

    def _text(self, e: Expr) -> str:
        if isinstance(e, Var):
            return self.var(e)
        if isinstance(e, Const):
            return f"{e.value!r}:{e.dtype}"
        if isinstance(e, Load):
            strides = e.buf.strides() if len(e.index) == len(e.buf.shape) else (None,) * len(e.index)
            idx = [f"@{(i.value * s * DTYPES[e.buf.dtype].itemsize) % ALIGN_BYTES}"
                   if isinstance(i, Const) and isinstance(i.value, int) and s is not None else self.expr(i)
                   for i, s in zip(e.index, strides)]
            mask = "" if e.mask is None else f" if {self.expr(e.mask)} else {e.other!r}"
            return f"{self.buf(e.buf)}[{', '.join(idx)}]{mask}"
        if isinstance(e, Op):
            return f"{e.op}{_attrs(e.attrs)}:{e.dtype}({', '.join(self.expr(a) for a in e.args)})"
        if isinstance(e, IOp):
            return f"({self.expr(e.a)} {e.op} {self.expr(e.b)})"
        if isinstance(e, Reduce):
            axes = ", ".join(self.var(a) for a in e.axes)
            return f"{e.op}:{e.dtype}[{axes}]({self.expr(e.body)})"
        if isinstance(e, Scan):
            return (f"scan_{e.op}{'_rev' if e.reverse else ''}:{e.dtype}[{self.var(e.axis)} to {self.expr(e.at)}]"
                    f"({self.expr(e.body)})")
        raise TypeError(f"no structure for {type(e).__name__}")


def _attrs(attrs: tuple[tuple[str, Any], ...]) -> str:
    return "{" + ", ".join(f"{k}={v!r}" for k, v in attrs) + "}" if attrs else ""


def structure_key(k: Kernel) -> str:
    """The kernel's structure as text: equal for two kernels exactly when they differ at most in names and
    in the positions (not the alignment) of fixed-index reads."""
    n = _Namer()
    head = f"{k.kind} {n.buf(k.out)}[{', '.join(n.var(c) for c in k.coords)}] = {n.expr(k.expr)}"
    return "; ".join([head, *(f"{n.buf(b)} = {n.expr(e)}" for b, e in k.also)])
