"""`--dynamic SPEC`: which input dimensions of a problem vary at run time.

SPEC is `batch` (dimension 0 of every tensor input, one size called `batch`), `x:0,y:1` (named
inputs' dimensions; a size is called `x_0`, `y_1`), or `auto` (every dimension torch.export can keep
symbolic). A name or dimension may carry a bound, `batch<=256`, `x:0<=64`: the largest size the
module must take (at least get_inputs()' own; without one, that size is the bound). The problem is
traced at the bounds; the written module accepts any size from 1 to the bound for each dynamic
dimension (its envelope), and the verifier checks it at several sizes inside it."""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass, replace
from typing import Any

import torch

from .errors import AkgError
from .problem import Problem
from .sym import PREFIX, Dyn


@dataclass(frozen=True)
class DynamicDims:
    spec: str
    params: tuple[str, ...]  # forward's tensor-or-number parameters, in order
    dims: tuple[tuple[int, int, str], ...]  # (argument position, dimension, size name)
    auto: bool = False
    bounds: tuple[int | None, ...] = ()  # per entry of `dims`: the largest size, or None (get_inputs()')

    @staticmethod
    def parse(spec: str, problem: Problem, at: tuple[str, int] | None = None) -> DynamicDims:
        """`at` (name, size): trace that size's dimensions at `size` (a schedule bucket's largest), not at
        its bound."""
        out = DynamicDims._parse(spec, problem)
        if at is None:
            return out
        bounds = out.bounds or (None,) * len(out.dims)
        return replace(out, bounds=tuple(at[1] if name == at[0] else b for (_, _, name), b in zip(out.dims, bounds)))

    @staticmethod
    def _parse(spec: str, problem: Problem) -> DynamicDims:
        spec = spec.strip()
        if spec.startswith("auto") and spec != "auto":
            raise AkgError(f"--dynamic {spec}: auto takes no bound; name the dimensions to bound them (x:0<=64)")
        fwd = [p.name for p in inspect.signature(problem.model_cls.forward).parameters.values()
               if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)][1:]
        _, inputs = problem.fake_inputs()
        params = tuple(fwd if len(fwd) == len(inputs) else [f"arg{i}" for i in range(len(inputs))])
        tensors = [i for i, x in enumerate(inputs) if isinstance(x, torch.Tensor)]
        if not tensors:
            raise AkgError(f"--dynamic {spec}: {problem.path.name}'s get_inputs() holds no tensor")
        if spec == "auto":
            return DynamicDims(spec, params, tuple((i, d, f"{params[i]}_{d}") for i in tensors
                                                   for d in range(inputs[i].dim())), auto=True)
        m = re.fullmatch(r"([A-Za-z_]\w*)\s*(?:<=\s*(\d+))?", spec)
        if m is not None:
            bad = [params[i] for i in tensors if inputs[i].dim() == 0]
            if bad:
                raise AkgError(f"--dynamic {spec}: input {bad[0]!r} has no dimension 0; name dimensions as "
                               "input:dim (e.g. x:0)")
            bound = int(m.group(2)) if m.group(2) else None
            out = DynamicDims(spec, params, tuple((i, 0, m.group(1)) for i in tensors), bounds=(bound,) * len(tensors))
            out.check_bounds(inputs)
            return out
        dims, bounds = [], []
        for part in spec.split(","):
            m = re.fullmatch(r"\s*([A-Za-z_]\w*):(\d+)\s*(?:<=\s*(\d+))?\s*", part)
            if m is None:
                raise AkgError(f"--dynamic {spec}: cannot read {part.strip()!r}; write NAME[<=N] (dimension 0 of "
                               "every input), input:dim[<=N][,input:dim...] or auto")
            name, d = m.group(1), int(m.group(2))
            bounds.append(int(m.group(3)) if m.group(3) else None)
            if name not in params:
                raise AkgError(f"--dynamic {spec}: forward has no input {name!r} (it takes {', '.join(params)})")
            i = params.index(name)
            if i not in tensors or d >= inputs[i].dim():
                raise AkgError(f"--dynamic {spec}: input {name!r} has no dimension {d}")
            dims.append((i, d, f"{name}_{d}"))
        out = DynamicDims(spec, params, tuple(dims), bounds=tuple(bounds))
        out.check_bounds(inputs)
        return out

    def check_bounds(self, inputs: list[Any]) -> None:
        for (i, d, _), b in zip(self.dims, self.bounds):
            if b is not None and b < inputs[i].shape[d]:
                raise AkgError(f"--dynamic {self.spec}: the bound {b} is below {self.params[i]}'s size "
                               f"{inputs[i].shape[d]} in get_inputs(); a bound is the largest size the module takes")

    def grown(self, inputs: list[Any]) -> list[Any]:
        """Fake inputs at the bounds (their values are never read: tracing needs shapes only)."""
        out = list(inputs)
        for (i, d, _), b in zip(self.dims, self.bounds):
            if b is not None and b != out[i].shape[d]:
                shape = list(out[i].shape)
                shape[d] = b
                out[i] = out[i].new_empty(shape)
        return out

    def export_shapes(self, inputs: list[Any]) -> tuple[Any, ...]:
        kind = torch.export.Dim.AUTO if self.auto else torch.export.Dim.DYNAMIC
        out: list[Any] = [{} if isinstance(x, torch.Tensor) else None for x in inputs]
        for i, d, _ in self.dims:
            out[i][d] = kind
        return tuple(out)

    def symbol_names(self, ep: torch.export.ExportedProgram) -> dict[str, str]:
        """torch's size symbols (s0, s1, ...) -> akg's size names, the first named dimension's name."""
        holders = [n for n in ep.graph.nodes if n.op == "placeholder"]
        users = [n for n, s in zip(holders, ep.graph_signature.input_specs) if s.kind.name == "USER_INPUT"]
        names: dict[str, str] = {}
        for i, d, name in self.dims:
            val = users[i].meta["val"] if i < len(users) else None
            node = getattr(val.shape[d], "node", None) if isinstance(val, torch.Tensor) else None
            if node is None or not node.expr.is_Symbol:
                if not self.auto:
                    raise AkgError(f"--dynamic {self.spec}: {self.params[i]} dimension {d} cannot vary (the program "
                                   "fixes it); leave it static")
                continue
            if str(node.expr) in names:
                continue
            taken = set(names.values())
            k = 1
            unique = name
            while unique in taken:  # another size under the same name (inputs whose dimensions differ)
                unique, k = f"{name}{k}", k + 1
            names[str(node.expr)] = unique
        if not names:
            raise AkgError(f"--dynamic {self.spec}: every dimension is fixed by the program; nothing can vary")
        return names

    def describe(self, g: Any) -> dict[str, Any]:
        """What the written module and the verifier need: per size name, the size it was traced at and
        where it appears among forward's inputs: [(argument position, dimension)]."""
        out: dict[str, Any] = {}
        sig = g.meta.get("signature", [])
        ins = {n.name: n for n in g.inputs}
        for pos, (_, node, _) in enumerate(sig):
            if node is None:
                continue
            for d, s in enumerate(ins[node].shape):
                if isinstance(s, Dyn) and len(s.poly) == 1 and s.poly[0][1] == 1 and len(s.poly[0][0]) == 1:
                    name = s.poly[0][0][0][len(PREFIX):]
                    entry = out.setdefault(name, {"traced": int(s), "dims": []})
                    entry["dims"].append((pos, d))
        return out


def bucket_bounds(bound: int) -> list[int]:
    """The largest size of each schedule bucket up to `bound`: 16, 64, 256, ... below it, then it."""
    out, b = [], 16
    while b < bound:
        out.append(b)
        b *= 4
    return out + [bound]
