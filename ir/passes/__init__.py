"""Registered passes (`REGISTRY`, filled by `@register`) and pipeline strings for `akg ir --passes` and
`akg translate`: comma-separated pass names, each with options as `name{key=value key=value}`
(a tuple option takes `a:b:c`)."""

from __future__ import annotations

import dataclasses
import importlib
import re
from typing import Any

from ..errors import AkgError
from ..graph import Graph
from ..verify import verify_graph
from .base import REGISTRY, Firing, P, Pass, Pat, Pipeline, RewritePass, Rewriter, Rule, Trace, X, register
from .cleanup import Canonicalize, CommonSubexpr, ConstantFold, DeadCode
from .composites import Decompose
from .fusion import FuseKernels
from .layout import KMajorOperands, ViewsPerUse
from .library import MarkLibrary
from .phases import TransposedPhases
from .reshapes import SinkReshapes
from .simplify import Simplify
from .split import SplitK, SplitReductions


@register
@dataclasses.dataclass(frozen=True)
class SimplifyAll(Pipeline):
    """Every cleanup and algebraic pass, to a fixed point."""

    name = "simplify"
    stages = (Canonicalize, ConstantFold, Simplify, CommonSubexpr, DeadCode)


_ITEM = re.compile(r"\s*(\w+)(?:\{([^}]*)\})?\s*(?:,|$)")


def _option(cls: type, key: str, text: str) -> Any:
    fields = {f.name: f for f in dataclasses.fields(cls)}
    if key not in fields:
        raise AkgError(f"pass {cls.name!r} has no option {key!r}; its options: {', '.join(fields) or 'none'}")
    default = fields[key].default
    if isinstance(default, tuple):
        return tuple(x for x in text.split(":") if x)
    if isinstance(default, bool):
        return text.lower() in ("1", "true", "yes")
    return type(default)(text) if default is not None else text


# passes defined with the kernel IR they plan for (row and attention fusion), imported when first named:
# registered by their own modules, not by importing `ir`
_ELSEWHERE = {"rows": "ir.kernel.rows", "flash": "ir.kernel.flash"}


def pass_names() -> list[str]:
    return sorted(set(REGISTRY) | set(_ELSEWHERE))


def pass_class(name: str) -> type[Pass]:
    """The registered pass of this name; an unknown name is a one-line error."""
    if name not in REGISTRY and name in _ELSEWHERE:
        importlib.import_module(_ELSEWHERE[name])
    if name not in REGISTRY:
        raise AkgError(f"unknown pass {name!r}; choose from {', '.join(pass_names())}")
    return REGISTRY[name]


def parse_pipeline(spec: str) -> list[Pass]:
    """Pass instances for a pipeline string; an unknown pass or option is a one-line error."""
    out: list[Pass] = []
    pos = 0
    spec = spec.strip()
    while pos < len(spec):
        m = _ITEM.match(spec, pos)
        if m is None or m.end() == pos:
            raise AkgError(f"cannot read the pass pipeline at {spec[pos:]!r}: write name,name{{key=value}}")
        name, opts = m.group(1), m.group(2) or ""
        cls = pass_class(name)
        kw = dict(kv.split("=", 1) for kv in opts.split() if kv)
        out.append(cls(**{k: _option(cls, k, v) for k, v in kw.items()}))
        pos = m.end()
    return out


def pass_text(p: Pass) -> str:
    """A pass value as a pipeline string names it: `name`, or `name{key=value ...}` with the options that
    differ from their defaults (a tuple as `a:b:c`); `parse_pipeline` reads it back to an equal value."""
    opts = []
    for f in dataclasses.fields(p):  # type: ignore[arg-type]
        v = getattr(p, f.name)
        if v == f.default:
            continue
        opts.append(f"{f.name}={':'.join(v) if isinstance(v, tuple) else int(v) if isinstance(v, bool) else v}")
    return p.name + (f"{{{' '.join(opts)}}}" if opts else "")


@dataclasses.dataclass(frozen=True)
class PassPipeline:
    """A pipeline as a value (xDSL's PassPipeline): pass values in order, printed as the pipeline string
    `akg ir --passes` takes."""

    passes: tuple[Pass, ...]

    @classmethod
    def parse(cls, spec: str) -> PassPipeline:
        return cls(tuple(parse_pipeline(spec)))

    def __str__(self) -> str:
        return ",".join(pass_text(p) for p in self.passes)

    def __add__(self, other: PassPipeline) -> PassPipeline:
        return PassPipeline(self.passes + other.passes)

    def split(self, n: int) -> tuple[PassPipeline, PassPipeline]:
        """The first `n` passes and the rest."""
        return PassPipeline(self.passes[:n]), PassPipeline(self.passes[n:])


def run_passes(g: Graph, pipeline: str | list[str] | PassPipeline, trace: Trace | None = None,
               verify: bool = False) -> Trace:
    """Run a pipeline (a value, a string, or a list of pass names) on `g`; with `verify`, check the graph's
    structure after each pass."""
    if isinstance(pipeline, PassPipeline):
        passes = list(pipeline.passes)
    else:
        passes = parse_pipeline(pipeline if isinstance(pipeline, str) else ",".join(pipeline))
    trace = trace or Trace()
    for p in passes:
        p.run(g, trace)
        if verify:
            verify_graph(g)
    return trace


__all__ = ["REGISTRY", "Firing", "P", "Pass", "PassPipeline", "Pat", "Pipeline", "Rewriter", "RewritePass", "Rule",
           "Trace", "X",
           "Canonicalize", "CommonSubexpr", "ConstantFold", "DeadCode", "Decompose", "FuseKernels", "KMajorOperands",
           "MarkLibrary", "Simplify", "SimplifyAll", "SinkReshapes", "SplitK", "SplitReductions", "TransposedPhases",
           "ViewsPerUse", "parse_pipeline", "pass_class", "pass_names", "pass_text", "register", "run_passes"]
