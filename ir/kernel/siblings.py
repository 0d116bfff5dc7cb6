"""Sibling outputs in one kernel: where one kernel's value is computed inside another's of the same
shape (the mean that a variance subtracts, the sum inside a mean, the maximum inside a log-sum-exp), or
inside a row kernel as a value of its rows (the mean and deviation of a standardisation that also
returns them), the larger kernel stores it too (`Kernel.also`) and the smaller one is gone, so the input
is read once.
`torch.var_mean` lowered as two reductions read its input twice; eager reads it once."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from .analysis import row_split, same_renamed
from .ir import Const, Expr, Kernel, LibraryCall, Load, Rewrite, Var, free_vars, walk

# kernels whose templates store `also`: a reduce kernel one value per output element, a row kernel one
# per row (its sibling's shape is the row kernel's with the columns kept as size 1)
KINDS = ("reduce", "rownorm")


def row_vars(k: Kernel) -> tuple[Var, ...]:
    """The coordinates a kernel's `also` values are indexed by: all of a reduce kernel's, a row kernel's
    rows (size-1 axes ride along, as in the row templates)."""
    if k.kind != "rownorm":
        return k.coords
    rs = row_split(k)
    return tuple(v for v in k.coords if rs is not None and (v in rs[0] or v.extent == 1))


def _inside(a: Kernel, b: Kernel) -> Expr | None:
    """The node of `a`'s value that computes `b`'s value at `a`'s (row) coordinates, or None."""
    rows = row_vars(a)
    want = [x.extent if x in rows else 1 for x in a.coords]
    if not rows or [y.extent for y in b.coords] != want:
        return None
    ren = {y.name: x.name for x, y in zip(a.coords, b.coords) if x in rows}
    memo: dict[int, frozenset[str]] = {}
    if not free_vars(b.expr, memo) <= set(ren):  # a size-1 axis standing for a column: not a row value
        return None
    names = {v.name for v in rows}
    for node in walk(a.expr):  # children first: the smallest match (a shared node is printed once)
        if isinstance(node, Var) or not free_vars(node, memo) <= names:
            continue
        if same_renamed(node, b.expr, ren):
            return node
    return None


class _Reuse(Rewrite):
    """`a`'s value with its loads of `b`'s output at its own (row) position replaced by `node`, the value
    it computes itself (a standardisation that divides by a deviation around a mean it also loads);
    unchanged sub-trees stay the same objects. `stray`: a load of `b` elsewhere (then no merge)."""

    def __init__(self, a: Kernel, b: Kernel, node: Expr) -> None:
        super().__init__()
        rows = row_vars(a)
        self.buf, self.node, self.stray = b.out, node, False
        self.at = [v.name if v in rows else None for v in a.coords]

    def _here(self, e: Load) -> bool:
        return len(e.index) == len(self.at) and e.mask is None and all(
            isinstance(i, Var) and i.name == n if n is not None else isinstance(i, Const) and i.value == 0
            for i, n in zip(e.index, self.at))

    def _go(self, e: Expr) -> Expr:
        if isinstance(e, Load) and e.buf == self.buf:
            if self._here(e):
                return self.node
            self.stray = True
            return e
        return self.rebuild(e)


def _reads(step: Kernel | LibraryCall, name: str) -> bool:
    if isinstance(step, Kernel):
        return any(buf.name == name for buf in step.inputs())
    return any(a is not None and a.name == name for a in step.args)


def _writes(step: Kernel | LibraryCall) -> list[str]:
    return [step.out.name] + ([buf.name for buf, _ in step.also] if isinstance(step, Kernel) else [])


def merge_siblings(steps: Sequence[Kernel | LibraryCall]) -> list[Kernel | LibraryCall]:
    """`steps` with every reduce kernel whose value another kernel computes on the way (for each of
    its elements, or each of its rows) folded into that kernel as one more output, at the larger
    kernel's place (where a step between them reads the smaller one's output: at the smaller one's
    place, if the larger reads nothing written in between; else the two stay apart)."""
    out = list(steps)
    i = 0
    while i < len(out):
        a = out[i]
        if isinstance(a, Kernel) and a.kind in KINDS and a.reductions():
            for j, b in enumerate(out):
                if j == i or not isinstance(b, Kernel) or b.kind != "reduce" or b.also or not b.reductions():
                    continue
                # a step between them reads the smaller one's output: the larger moves up to the
                # smaller's place where it reads nothing written in between (a partial variance
                # computed before the mean of the partial means, ir.passes.split)
                early = j < i and any(_reads(s, b.out.name) for s in out[j + 1:i])
                if early and any(_reads(a, w) for s in out[j:i] for w in _writes(s)):
                    continue
                node = _inside(a, b)
                if node is None:
                    continue
                expr = a.expr
                if _reads(a, b.out.name):  # it loads what it computes: the load becomes the value
                    reuse = _Reuse(a, b, node)
                    expr = reuse(a.expr)
                    if reuse.stray:
                        continue
                a = replace(a, expr=expr, also=a.also + ((b.out, node),))
                if early:
                    del out[i]
                    out[j] = a
                    i = j
                else:
                    out[i] = a
                    del out[j]
                    if j < i:
                        i -= 1
                break
            else:
                i += 1
            continue
        i += 1
    return out
