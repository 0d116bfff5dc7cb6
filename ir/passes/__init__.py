"""Named passes for `akg ir --passes` and the pipeline."""

from __future__ import annotations

from collections.abc import Callable

from ..graph import Graph
from .base import Firing, P, Pass, Pat, Pipeline, RewritePass, Rewriter, Rule, Trace, X
from .cleanup import CommonSubexpr, ConstantFold, DeadCode, canonicalize
from .lowering import Decompose
from .simplify import Simplify


def simplify_pipeline() -> Pipeline:
    return Pipeline("simplify", (canonicalize(), ConstantFold(), Simplify(), CommonSubexpr(), DeadCode()))


PASSES: dict[str, Callable[[], Pass]] = {
    "canonicalize": canonicalize,
    "fold": ConstantFold,
    "cse": CommonSubexpr,
    "dce": DeadCode,
    "algebraic": Simplify,
    "simplify": simplify_pipeline,
    "decompose": Decompose,
}


def run_passes(g: Graph, names: list[str], trace: Trace | None = None, verify: bool = False) -> Trace:
    """Run the named passes in order; with `verify`, check the graph's structure after each."""
    from ..verify import verify_graph

    trace = trace or Trace()
    for name in names:
        if name not in PASSES:
            raise KeyError(name)
        PASSES[name]().run(g, trace)
        if verify:
            verify_graph(g)
    return trace


__all__ = ["PASSES", "Firing", "P", "Pass", "Pat", "Pipeline", "Rewriter", "RewritePass", "Rule", "Trace", "X",
           "CommonSubexpr", "ConstantFold", "DeadCode", "Decompose", "Simplify", "canonicalize",
           "run_passes", "simplify_pipeline"]
