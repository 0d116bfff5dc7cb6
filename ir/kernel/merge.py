"""Pointwise kernels of one shape merged into one kernel with several outputs (`Kernel.also`).

A training forward graph stores most of its pointwise values: each is saved for the backward pass and
read by the next op too, so fusion materialises it and lowering gives it a kernel of its own. A GRU step
is then seven kernels (two gates, the candidate, the blend and their parts), each launched, each reading
what the last one wrote. Where a later pointwise kernel of the same shape reads an earlier one's outputs
only at its own coordinates, the two are one kernel: the earlier values computed in registers and stored
on the way (its loads of them become the values), at the later kernel's place. The earlier kernel may
move past steps that neither read its outputs nor write what it reads."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import replace

from .ir import Buf, Expr, Kernel, LibraryCall, Load, Rewrite, Var


class _Substitute(Rewrite):
    """An expression with the variables of `ren` renamed and the loads of `values`' buffers at the
    coordinates `at` replaced by those values."""

    def __init__(self, ren: dict[Var, Var], values: dict[str, Expr], at: tuple[Var, ...]) -> None:
        super().__init__()
        self.ren, self.values, self.at = ren, values, at
        self.stray = False  # a load of a replaced buffer elsewhere than `at`

    def _go(self, e: Expr) -> Expr:
        if isinstance(e, Var):
            return self.ren.get(e, e)
        if isinstance(e, Load) and e.buf.name in self.values:
            if e.mask is None and e.index == self.at:
                return self.values[e.buf.name]
            self.stray = True
        return self.rebuild(e)


def _reads(step: Kernel | LibraryCall) -> set[str]:
    if isinstance(step, Kernel):
        return {b.name for b in step.inputs()}
    return {a.name for a in step.args if a is not None}


def _writes(step: Kernel | LibraryCall) -> set[str]:
    return {b.name for b in step.outs()} if isinstance(step, Kernel) else {step.out.name}


def _mergeable(k: Kernel | LibraryCall) -> bool:
    return isinstance(k, Kernel) and k.kind == "pointwise" and not k.in_place


def _into(a: Kernel, b: Kernel, live: set[str]) -> Kernel | None:
    """`a` computed inside `b` (same extents), its outputs in `live` stored on the way; None where `b` reads
    an output of `a` elsewhere than at its own coordinates."""
    if tuple(v.extent for v in a.coords) != tuple(v.extent for v in b.coords):
        return None
    to_b = _Substitute(dict(zip(a.coords, b.coords)), {}, b.coords)
    values: dict[str, Expr] = {buf.name: to_b(e) for buf, e in ((a.out, a.expr), *a.also)}
    sub = _Substitute({}, values, b.coords)
    expr = sub(b.expr)
    also = [(buf, sub(e)) for buf, e in b.also]
    if sub.stray:
        return None
    mine: list[tuple[Buf, Expr]] = [(buf, values[buf.name]) for buf in a.outs() if buf.name in live]
    return replace(b, expr=expr, also=(*mine, *also))


def merge_pointwise(steps: Sequence[Kernel | LibraryCall], outputs: set[str]) -> list[Kernel | LibraryCall]:
    """`steps` with each pointwise kernel folded into the next pointwise kernel of its extents it can join
    (see the module text); a kernel that meets a step reading its outputs or writing what it reads stays.
    An output of the folded kernel that no other step reads is no longer stored (`outputs`: the program's,
    always stored). Each step's reads are gathered once (a recurrence's backward has thousands of steps)."""
    out = list(steps)
    reads = [_reads(s) for s in out]
    readers = Counter(name for r in reads for name in r)
    i = 0
    while i < len(out):
        a = out[i]
        merged = False
        if _mergeable(a):
            assert isinstance(a, Kernel)
            mine, needs = {b.name for b in a.outs()}, reads[i]
            for j in range(i + 1, len(out)):
                s = out[j]
                if _mergeable(s):
                    assert isinstance(s, Kernel)
                    # a's buffers are written by a alone, so only steps after it read them: any besides s
                    live = {n for n in mine if n in outputs or readers[n] > (n in reads[j])}
                    joined = _into(a, s, live)
                    if joined is not None:
                        readers.subtract(reads[i])
                        readers.subtract(reads[j])
                        out[j], reads[j] = joined, _reads(joined)
                        readers.update(reads[j])
                        del out[i], reads[i]
                        merged = True
                        break
                if reads[j] & mine or _writes(s) & (needs | mine):
                    break
        if not merged:
            i += 1
    return out
