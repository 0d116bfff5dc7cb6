"""The converter registry behind lifting: one converter per ATen target (filled by `ir.aten`), the
context a converter builds graph nodes through, and where in the problem file a node came from."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx

from .graph import Graph, Node
from .sym import is_dynamic, size
from .types import FLOAT_DTYPES


@dataclass
class LiftCtx:
    graph: Graph
    fx_node: torch.fx.Node | None = None
    allow_opaque: bool = False
    opaque: list[str] = field(default_factory=list)
    hint: str | None = None  # names the nodes it adds (else the FX node's name)

    # --- helpers used by converters
    def add(self, op: str, args: list[Node | None], /, **attrs: Any) -> Node:
        hint = self.hint or (self.fx_node.name if self.fx_node is not None else op)
        n = self.graph.add(op, args, attrs, name=hint)
        if self.fx_node is not None:
            n.meta["source"] = source_line(self.fx_node)
        return n

    def out_shape(self) -> list[int]:
        val = self.fx_node.meta["val"] if self.fx_node is not None else None
        return [size(d) for d in val.shape]

    def scalar(self, value: Any, like: Node | None = None) -> Node:
        """A Python number as a 0-d `scalar` node that promotes like a Python number would."""
        if isinstance(value, Node):
            return value
        like_dt = like.dtype if like is not None else "f32"
        if isinstance(value, bool):
            dt = "bool"
        elif isinstance(value, float) or like_dt in FLOAT_DTYPES:  # a run-time size stays symbolic
            dt, value = (like_dt if like_dt in FLOAT_DTYPES else "f32"), value if is_dynamic(value) else float(value)
        else:
            dt = like_dt if like_dt not in ("bool",) else "i64"
        return self.graph.add("scalar", [], {"value": value, "dtype": dt}, name="c")


Converter = Callable[..., Any]
CONVERTERS: dict[str, Converter] = {}


@dataclass(frozen=True)
class Bound:
    """An ATen call's arguments by their schema's names, defaults filled in: what the converter of a long
    schema reads (`a.stride`, `a.output_mask`) in place of a dozen positional parameters."""

    values: dict[str, Any]

    def __getattr__(self, name: str) -> Any:
        try:
            return self.values[name]
        except KeyError:
            raise AttributeError(name) from None


def bind(target: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Bound:
    """`args` and `kwargs` of a call of the op `target` (an OpOverload) by its schema's argument names."""
    values: dict[str, Any] = {}
    positional = list(args)
    for a in target._schema.arguments:
        if positional and not a.kwarg_only:
            values[a.name] = positional.pop(0)
        elif a.name in kwargs:
            values[a.name] = kwargs[a.name]
        elif a.has_default_value():
            values[a.name] = a.default_value
        else:
            raise TypeError(f"{target} called without its argument {a.name!r}")
    return Bound(values)


def converts(*targets: str, bound: bool = False) -> Callable[[Converter], Converter]:
    """Registers a converter for `targets`. It is called with the lift's context and the call's arguments as
    the FX node has them, or, `bound`, with one `Bound` value of them by name."""
    def reg(fn: Converter) -> Converter:
        conv = fn if not bound else (
            lambda cx, *args, **kwargs: fn(cx, bind(cx.fx_node.target, args, kwargs)))
        for t in targets:
            CONVERTERS[t] = conv
        return fn
    return reg


_FRAME = re.compile(r'File "([^"]+)", line (\d+), in \S+\n\s*(.*)')


def source_line(n: torch.fx.Node, path: str | None = None) -> str:
    """`file:line: code` of the deepest frame in the problem file (or the last frame)."""
    frames = _FRAME.findall(n.meta.get("stack_trace") or "")
    if path is not None:
        frames = [f for f in frames if f[0] == path] or frames
    if not frames:
        return "unknown location"
    f, line, code = frames[-1]
    return f"{f.rsplit('/', 1)[-1]}:{line}: `{code.strip()}`"
