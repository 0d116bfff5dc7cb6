"""Structural verifier for graphs, run between passes in tests (and by `akg ir --verify`)."""

from __future__ import annotations

from .graph import Graph
from .infer import infer_type
from .ops import OPS
from .types import TensorType


class IRVerifyError(ValueError):
    pass


def verify_graph(g: Graph, check_types: bool = True) -> None:
    """Raise IRVerifyError listing every problem: unknown ops, bad arity or attributes, uses before
    definition, duplicate names, types that disagree with inference, missing or mismatched weights."""
    errs: list[str] = []
    defined: set[int] = set()
    names: set[str] = set()
    seen_compute = False
    for n in g.nodes:
        where = f"%{n.name} ({n.op})"
        if n.name in names:
            errs.append(f"{where}: name defined twice")
        names.add(n.name)
        d = OPS.get(n.op)
        if d is None:
            errs.append(f"{where}: unknown op")
            continue
        if n.op == "input" and seen_compute:
            errs.append(f"{where}: inputs must come first")
        seen_compute |= n.op not in ("input", "param")
        if len(n.args) < d.min_args or (d.max_args is not None and len(n.args) > d.max_args):
            errs.append(f"{where}: takes {d.min_args}..{d.max_args} operands, has {len(n.args)}")
        for a in n.args:
            if a is not None and id(a) not in defined:
                errs.append(f"{where}: uses %{a.name} before it is defined")
        unknown = set(n.attrs) - set(d.attrs)
        missing = set(d.required()) - set(n.attrs)
        if unknown:
            errs.append(f"{where}: unknown attribute(s) {sorted(unknown)}")
        if missing:
            errs.append(f"{where}: missing attribute(s) {sorted(missing)}")
        if not isinstance(n.type, TensorType):
            errs.append(f"{where}: has no tensor type")
        elif n.op == "param":
            w = g.weights.get(n.attrs.get("key"))
            if w is None:
                errs.append(f"{where}: no weight for key {n.attrs.get('key')!r}")
            elif TensorType.of(w) != n.type:
                errs.append(f"{where}: weight is {TensorType.of(w)}, node says {n.type}")
        elif check_types and n.op != "input" and not unknown and not missing and not errs:
            try:
                t = infer_type(n.op, [a.type if a is not None else None for a in n.args], n.attrs)
                if t.shape != n.type.shape or t.dtype != n.type.dtype:
                    errs.append(f"{where}: type {n.type} but its operands give {t}")
            except Exception as e:  # noqa: BLE001 - any failure here is a verifier finding
                errs.append(f"{where}: operands rejected: {str(e).splitlines()[0]}")
        defined.add(id(n))
    for o in g.outputs:
        if id(o) not in defined:
            errs.append(f"output %{o.name} is not a node of the graph")
    if not g.outputs:
        errs.append("graph has no outputs")
    if errs:
        raise IRVerifyError(f"graph {g.name}: " + "; ".join(errs))
