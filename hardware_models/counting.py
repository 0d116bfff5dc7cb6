"""Work of graph nodes: FLOPs per kind of unit and dtype, and compulsory bytes of node sets.

Contractions are counted as `contraction` work in their input dtype; the cost model decides which
unit runs them on a target (tensor cores in TF32 for cuDNN convolutions, say). Composites are
counted through their decomposition, so they need no formula of their own.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable

from ir.decompose import DECOMPOSITIONS, GraphEmitter
from ir.graph import Graph, Node
from ir.ops import opdef

SOURCES = ("input", "param", "scalar", "full", "arange")
# flop-equivalents per element: transcendental ops run on slower special-function units
TRANSCENDENTAL = {"exp": 4, "log": 4, "log1p": 4, "expm1": 4, "tanh": 4, "sigmoid": 5, "erf": 4, "sin": 4,
                  "cos": 4, "rsqrt": 2, "sqrt": 2, "reciprocal": 2, "pow": 8, "gelu": 8, "silu": 5, "mish": 12,
                  "softplus": 8, "elu": 5, "selu": 5, "atan2": 8, "div": 2, "remainder": 3}
REDUCTION_WEIGHT = {"var": 3, "std": 4, "norm": 2}

Key = tuple[str, str]  # (kind: contraction|vector, dtype)


def _prod(xs: Iterable[int]) -> int:
    return math.prod(xs)


def node_flops(n: Node) -> Counter[Key]:
    """FLOPs of one node by (kind, dtype)."""
    c: Counter[Key] = Counter()
    d = opdef(n.op)
    args = [a for a in n.args if a is not None]
    if n.op in SOURCES or d.group == "movement" or n.op == "opaque":
        return c
    if d.group == "composite":
        return _composite_flops(n)
    out = n.type.numel
    in_dtype = args[0].dtype if args else n.dtype
    if d.group == "contraction":
        x, w = args[0], args[1]
        if n.op == "matmul":
            k = x.shape[-1]
            macs = out * k
        elif n.op == "linear":
            macs = out * w.shape[1]
        elif n.op == "conv":
            macs = out * w.shape[1] * _prod(w.shape[2:])
        elif n.op == "conv_weight_grad":  # (go, x, w): each incoming gradient meets Cin/groups x kernel inputs
            macs = args[0].type.numel * args[2].shape[1] * _prod(args[2].shape[2:])
        else:  # conv_transpose: every input element scatters into Cout/groups x kernel outputs
            macs = x.type.numel * w.shape[1] * _prod(w.shape[2:])
        c[("contraction", in_dtype)] += 2 * macs
        if len(args) > 2 and n.op != "conv_weight_grad":
            c[("vector", n.dtype)] += out  # bias
        return c
    if d.group == "reduction":
        c[("vector", in_dtype)] += args[0].type.numel * REDUCTION_WEIGHT.get(n.op, 1)
    elif d.group == "window":
        k = _prod(n.attrs["kernel"]) if "kernel" in n.attrs else max(1, args[0].type.numel // max(out, 1))
        c[("vector", in_dtype)] += out * k
    else:  # pointwise, scans, random
        c[("vector", n.dtype if n.dtype != "bool" else in_dtype)] += out * TRANSCENDENTAL.get(n.op, 1)
    return c


def _composite_flops(n: Node) -> Counter[Key]:
    scratch = Graph("scratch")
    ins = [scratch.input(f"a{i}", a.type) if a is not None else None for i, a in enumerate(n.args)]
    e = GraphEmitter(scratch, n.name)
    DECOMPOSITIONS[n.op](e, ins, n.attrs)
    total: Counter[Key] = Counter()
    for m in e.created:
        total += node_flops(m)
    return total


def flops(nodes: Iterable[Node]) -> Counter[Key]:
    total: Counter[Key] = Counter()
    for n in nodes:
        total += node_flops(n)
    return total


def stored(n: Node) -> bool:
    """Values that live in memory (constants are materialised inside kernels)."""
    return n.op not in ("scalar", "full", "arange")


def compulsory_bytes(nodes: list[Node], outputs: list[Node]) -> tuple[int, int]:
    """(read, written) bytes when every value from outside `nodes` is read once and every output is
    written once: the traffic no schedule can avoid."""
    members = {id(n) for n in nodes}
    seen: set[int] = set()
    read = 0
    for n in nodes:
        for a in n.args:
            if a is not None and id(a) not in members and id(a) not in seen and stored(a):
                seen.add(id(a))
                read += a.type.nbytes
    written = sum(o.type.nbytes for o in {id(o): o for o in outputs}.values())
    return read, written


def program_bytes(g: Graph) -> tuple[int, int]:
    """Compulsory traffic of a whole program: its inputs and used weights read, its outputs written."""
    read = sum(n.type.nbytes for n in g.nodes if n.op in ("input", "param"))
    written = sum(o.type.nbytes for o in {id(o): o for o in g.outputs}.values())
    return read, written


def necessary_ops(nodes: list[Node], outputs: list[Node]) -> int:
    """Operations a group cannot do without: its arithmetic, one per value it defines, and its
    compulsory traffic in elements (the yardstick of the kernel-IR cost gate)."""
    read, written = compulsory_bytes(nodes, outputs)
    return sum(flops(nodes).values()) + sum(n.type.numel for n in nodes) + (read + written) // 4
