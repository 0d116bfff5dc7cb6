"""Equal reductions computed once: a kernel whose value reduces the same thing twice (a layer norm's
mean, and the mean inside its variance) names one `Reduce` twice, so every renderer (which prints a
shared node once) computes it once. Two reductions are equal when their bodies are, up to the names of
their own axes (each lowering of a graph op draws fresh axis variables)."""

from __future__ import annotations

from dataclasses import replace

from .analysis import same_renamed
from .ir import Expr, IOp, Kernel, Load, Op, Reduce, Rewrite, Scan


class _Share(Rewrite):
    def __init__(self) -> None:
        super().__init__()
        self.seen: dict[tuple[str, str, tuple[int, ...]], list[Reduce]] = {}
        self.shared = False

    def _go(self, e: Expr) -> Expr:
        if isinstance(e, Load):
            return replace(e, index=tuple(self(i) for i in e.index), mask=self(e.mask) if e.mask is not None else None)
        if isinstance(e, Op):
            return replace(e, args=tuple(self(a) for a in e.args))
        if isinstance(e, IOp):
            return replace(e, a=self(e.a), b=self(e.b))
        if isinstance(e, Scan):
            return replace(e, body=self(e.body), at=self(e.at))
        if isinstance(e, Reduce):
            r = replace(e, body=self(e.body))
            peers = self.seen.setdefault((r.op, r.dtype, tuple(v.extent for v in r.axes)), [])
            for p in peers:
                if same_renamed(p, r, {}):
                    self.shared = True
                    return p
            peers.append(r)
            return r
        return e


def share_reductions(k: Kernel) -> Kernel:
    """`k` with every reduction equal to an earlier one replaced by it (the kernel itself when none is)."""
    if len(k.reductions()) < 2:
        return k
    share = _Share()
    e = share(k.expr)
    return replace(k, expr=e) if share.shared else k
