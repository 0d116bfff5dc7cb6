"""Printer and `lark` parser for the graph IR text form (round-trips exactly).

Weights are not part of the text: a `param` names its state_dict key, and `parse_graph` takes the
weights separately (like an MLIR resource blob kept beside the module).
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

import torch
from lark import Lark, Transformer, v_args

from .graph import Graph, Node
from .types import TensorType


@lru_cache(maxsize=1)
def _parser() -> Lark:
    return Lark((Path(__file__).parent / "ir.lark").read_text(), parser="lalr",
                maybe_placeholders=True)


@v_args(inline=True)
class _ToPython(Transformer):
    def float(self, tok):
        return float(tok)

    def int(self, tok):
        return int(tok)

    def true(self):
        return True

    def false(self):
        return False

    def none(self):
        return None

    def string(self, tok):
        return json.loads(tok)

    def list(self, *items):
        return tuple(items)

    def empty_list(self):
        return ()

    def var(self, tok):
        return str(tok)[1:]

    def no_arg(self):
        return _NoArg

    def attr(self, name, value):
        return (str(name), value)

    def attrs(self, *items):
        return dict(i for i in items if i is not None)

    def type(self, dtype, *rest):
        *dims, layout = rest
        shape = tuple(int(d) for d in dims if d is not None)
        return TensorType(shape, str(dtype), str(layout) if layout is not None else "contiguous")

    def stmt(self, var, ty, op, *rest):
        attrs = next((r for r in rest if isinstance(r, dict)), {})
        args = [r for r in rest if r is not None and not isinstance(r, dict)]
        return (str(var)[1:], ty, str(op), args, attrs)

    def ret(self, *items):
        outs = [str(v)[1:] for v in items if v is not None and not isinstance(v, tuple)]
        return outs, [v for v in items if isinstance(v, tuple)]

    def update(self, key, var):
        return (json.loads(key), str(var)[1:])

    def start(self, name, *rest):
        return (str(name), list(rest[:-1]), rest[-1])


class _NoArgType:
    pass


_NoArg = _NoArgType()


class IRParseError(ValueError):
    pass


def parse_graph(text: str, weights: dict[str, torch.Tensor] | None = None) -> Graph:
    from lark.exceptions import LarkError

    try:
        name, stmts, ret = _ToPython().transform(_parser().parse(text))
    except LarkError as e:
        raise IRParseError(f"IR text does not parse: {str(e).splitlines()[0]}") from None
    g = Graph(name)
    env: dict[str, Node] = {}
    for var, ty, op, args, attrs in stmts:
        try:
            resolved = [None if a is _NoArg else env[a] for a in args]
        except KeyError as e:
            raise IRParseError(f"%{var} uses undefined value %{e.args[0]}") from None
        if var in env:
            raise IRParseError(f"%{var} is defined twice")
        node = g.add(op, resolved, attrs, ty, var)
        if node.name != var:
            raise IRParseError(f"bad value name %{var}")
        env[var] = node
    outs, updates = ret
    try:
        g.outputs = [env[v] for v in outs] + [env[v] for _, v in updates]
        if updates:
            g.meta["mutations"] = [k for k, _ in updates]
    except KeyError as e:
        raise IRParseError(f"return uses undefined value %{e.args[0]}") from None
    if weights is not None:
        g.weights = {p.attrs["key"]: weights[p.attrs["key"]] for p in g.params}
    return g
