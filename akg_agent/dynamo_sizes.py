"""Dynamo graphs with symbolic sizes (`torch.compile(..., dynamic=True)`, or dynamo's own after a second
input size): one written module serves every size up to a bound (`akg translate --dynamic`), so a new
batch size is translated again only when it exceeds every bound written so far.

Such a graph takes its sizes as int inputs (`s0`) beside the tensors whose dimensions they are. Its problem
file takes the tensors alone and reads each size off a tensor's shape, so the lift traces the sizes as
run-time values; the --dynamic spec names each symbolic dimension of the tensor inputs, bounded by the next
power of two above its size at this call (`Sizes.bounds`). A graph whose sizes cannot be read off an input
(a size with no dimension of its own) or whose outputs are not all tensors (a size returned) is written per
input size instead."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.fx


def _val(n: torch.fx.Node) -> Any:
    return n.meta.get("example_value", n.meta.get("val"))


def _symbol(d: Any) -> str | None:
    """The size symbol a dimension is (s0), or None for a fixed one (a constant SymInt included)."""
    node = getattr(d, "node", None)
    return str(node.expr) if node is not None and node.expr.is_Symbol else None


@dataclass(frozen=True)
class Sizes:
    """Where a graph's sizes live: per int input, (its position, a tensor input's position, dimension);
    and every symbolic dimension of its tensor inputs, (position, dimension)."""

    ints: tuple[tuple[int, int, int], ...]
    dims: tuple[tuple[int, int], ...]
    n: int  # inputs, ints included

    @property
    def tensors(self) -> list[int]:
        """The positions the written module takes: every input but the ints."""
        return [i for i in range(self.n) if i not in {p for p, _, _ in self.ints}]

    def now(self, args: Sequence[Any]) -> tuple[int, ...]:
        return tuple(int(args[i].shape[d]) for i, d in self.dims)

    def bounds(self, args: Sequence[Any]) -> tuple[int, ...]:
        """The bounds a module written at these arguments takes: each size's next power of two above it, so
        sizes up to about twice this one's are served without translating again (and the verifier, which
        checks sizes up to the bound, runs at most twice the size)."""
        return tuple(1 << s.bit_length() for s in self.now(args))

    def spec(self, names: Sequence[str], args: Sequence[Any]) -> str:
        """The --dynamic spec at these arguments: each symbolic dimension up to its bound."""
        return ",".join(f"{names[i]}:{d}<={b}" for (i, d), b in zip(self.dims, self.bounds(args)))

    def envelope(self, args: Sequence[Any]) -> tuple[Any, ...]:
        """What a module written at these arguments is for, per input (its cache key): a tensor's dtype,
        device and shape with each symbolic dimension at its bound; a size input as such."""
        bounds = dict(zip(self.dims, self.bounds(args)))
        ints = {p for p, _, _ in self.ints}
        return tuple("size" if i in ints else
                     (tuple(bounds.get((i, d), s) for d, s in enumerate(a.shape)), str(a.dtype), a.device.type)
                     if isinstance(a, torch.Tensor) else repr(a) for i, a in enumerate(args))

    def fits(self, bounds: tuple[int, ...], args: Sequence[Any]) -> bool:
        return all(1 <= s <= b for s, b in zip(self.now(args), bounds))


def sizes_of(gm: torch.fx.GraphModule) -> Sizes | None:
    """The graph's symbolic sizes, or None where it has none or they cannot be read off its tensors."""
    holders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    vals = [_val(n) for n in holders]
    where: dict[str, tuple[int, int]] = {}
    dims = []
    for i, v in enumerate(vals):
        if isinstance(v, torch.Tensor):
            for d, size in enumerate(v.shape):
                s = _symbol(size)
                if s is not None:
                    where.setdefault(s, (i, d))
                    dims.append((i, d))
    ints = []
    for i, v in enumerate(vals):
        if isinstance(v, torch.SymInt):
            s = _symbol(v)
            if s is None or s not in where:
                return None  # a size no tensor input carries
            ints.append((i, *where[s]))
        elif not isinstance(v, torch.Tensor):
            return None  # another Python value: written per value
    outs = next(n for n in gm.graph.nodes if n.op == "output").args[0]
    if not all(isinstance(o, torch.fx.Node) and isinstance(_val(o), torch.Tensor) for o in outs):
        return None
    return Sizes(tuple(ints), tuple(dims), len(holders)) if dims else None
