"""A whole graph evaluated with the interpreter's op meanings (ir.interp), freeing each intermediate
after its last use."""

from __future__ import annotations

from collections.abc import Sequence

from torch import Tensor

from .graph import Graph
from .interp import EvalCtx, eval_op


def run(graph: Graph, inputs: Sequence[Tensor], weights: dict[str, Tensor] | None = None,
        ctx: EvalCtx | None = None) -> list[Tensor]:
    """Evaluate `graph` on `inputs` (in signature order) with its weights (or `weights`)."""
    ctx = ctx or EvalCtx(device=inputs[0].device if inputs else "cpu")
    weights = graph.weights if weights is None else weights
    ins = graph.inputs
    if len(inputs) != len(ins):
        raise ValueError(f"graph takes {len(ins)} inputs, got {len(inputs)}")
    env: dict[int, Tensor] = {}
    for n, t in zip(ins, inputs):
        env[id(n)] = t
    remaining = _last_uses(graph)
    for n in graph.nodes:
        if n.op == "input":
            continue
        if n.op == "param":
            env[id(n)] = weights[n.attrs["key"]].to(ctx.device)
            continue
        args = [env[id(a)] if a is not None else None for a in n.args]
        env[id(n)] = eval_op(n.op, args, n.attrs, ctx)
        for a in remaining.get(id(n), ()):  # free intermediates early: full-size graphs are big
            env.pop(a, None)
    return [env[id(o)] for o in graph.outputs]


def _last_uses(graph: Graph) -> dict[int, list[int]]:
    last: dict[int, int] = {}
    for n in graph.nodes:
        for a in n.args:
            if a is not None:
                last[id(a)] = id(n)
    keep = {id(o) for o in graph.outputs} | {id(n) for n in graph.nodes if n.op in ("input", "param")}
    out: dict[int, list[int]] = {}
    for v, user in last.items():
        if v not in keep:
            out.setdefault(user, []).append(v)
    return out
