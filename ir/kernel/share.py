"""Equal reductions computed once: a kernel whose value reduces the same thing twice (a layer norm's
mean, and the mean inside its variance) names one `Reduce` twice, so every renderer (which prints a
shared node once) computes it once. Two reductions are equal when their bodies are, up to the names of
their own axes (each lowering of a graph op draws fresh axis variables)."""

from __future__ import annotations

from dataclasses import replace

from .analysis import same_renamed
from .ir import Expr, Kernel, Reduce, Rewrite


class _Share(Rewrite):
    def __init__(self) -> None:
        super().__init__()
        self.seen: dict[tuple[str, str, tuple[int, ...]], list[Reduce]] = {}
        self.shared = False

    def _go(self, e: Expr) -> Expr:
        r = self.rebuild(e)
        if not isinstance(r, Reduce):
            return r
        peers = self.seen.setdefault((r.op, r.dtype, tuple(v.extent for v in r.axes)), [])
        for p in peers:
            if same_renamed(p, r, {}):
                self.shared = True
                return p
        peers.append(r)
        return r


def share_reductions(k: Kernel) -> Kernel:
    """`k` with every reduction equal to an earlier one replaced by it (the kernel itself when none is)."""
    if len(k.reductions()) < 2:
        return k
    share = _Share()
    e = share(k.expr)
    return replace(k, expr=e) if share.shared else k
