"""`akg translate FILE --backward`: a ModelNew whose forward and backward passes are akg kernels.

The problem's Model is differentiated once by AOTAutograd as a function of its parameters and inputs (in
that order: the primals), partitioned into a forward graph (the outputs, then the saved activations) and
a backward graph (the saved activations and the outputs' gradients in, a gradient per primal out). Each
graph is written and verified like a torch.compile graph (`dynamo.CompiledGraph`: the backward module
against the float64 backward graph), kept in a folder beside the written file; the written file's
`ModelNew` subclasses Model (state-dict compatible) and runs both through one `torch.autograd.Function`.
"""

from __future__ import annotations

import ast
import copy
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch
import torch.fx
from torch.func import functional_call

from ir.errors import AkgError
from ir.problem import load_problem

from .built import load_written
from .cuda_graphs import draws_random
from .dynamo import CompiledGraph, GraphReport, Options
from .dynamo_train import decompositions, partition

_MODULE = '''"""Written by `akg translate {problem} --backward --dsl {dsl} --target {target}`: forward and backward
as akg kernels ({folder}/: the two written graphs, each verified against its float64 evaluation)."""
import importlib.util
import sys
from pathlib import Path

import torch

from akg_agent.backward import load_step

_HERE = Path(__file__).with_name("{folder}")
if not _HERE.is_dir():  # a copy of this file elsewhere (the verifier's sandbox): the folder where it was written
    _HERE = Path({where!r})
_spec = importlib.util.spec_from_file_location("akg_problem_{stem}", _HERE / "problem.py")
_problem = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = _problem
_spec.loader.exec_module(_problem)
_STEP = load_step(_HERE)


class ModelNew(_problem.Model):
    def forward(self, *inputs):
        return _STEP(self, *inputs)


get_inputs, get_init_inputs = _problem.get_inputs, _problem.get_init_inputs
# the torch calls the two graphs' modules make (the verifier holds a module to what it declares)
AKG_LIBRARY_CALLS = {calls!r}
'''


def updated_buffers(model: torch.nn.Module, inputs: Sequence[Any]) -> list[str]:
    """The buffers a training-mode forward writes (batch norm's running statistics and count), found by
    running a copy once."""
    probe = copy.deepcopy(model).train()
    before = {k: b.clone() for k, b in probe.named_buffers()}
    with torch.no_grad():
        probe(*inputs)
    return [k for k, b in probe.named_buffers() if not torch.equal(b, before[k])]


def _capture(model: torch.nn.Module, inputs: Sequence[Any], buffers: list[str]
             ) -> tuple[dict[str, Any], dict[str, Any]]:
    """AOTAutograd's forward and backward graphs of `model` at `inputs`, with the values each was called
    with (the backward's: the saved activations and gradients drawn for the outputs). The primals are the
    parameters, the `buffers` the forward writes, then the inputs; the forward returns the outputs, then
    those buffers' new values (written into copies, so AOTAutograd sees a pure function), then what it saves."""
    from functorch.compile import aot_function, make_boxed_func

    names = [k for k, _ in model.named_parameters()]
    n_p, n_b = len(names), len(buffers)
    got: dict[str, dict[str, Any]] = {}

    def compiler(kind: str) -> Callable[[torch.fx.GraphModule, Any], Any]:
        def compile_one(gm: torch.fx.GraphModule, _examples: Any) -> Any:
            def run(*args: Any) -> Any:
                got.setdefault(kind, {"gm": gm, "args": [a.detach().clone() if isinstance(a, torch.Tensor) else a
                                                         for a in args]})
                return gm(*args)
            return make_boxed_func(run)
        return compile_one

    def fn(*primals: Any) -> Any:
        state = dict(zip(names, primals[:n_p]))
        state.update({k: b.clone() for k, b in zip(buffers, primals[n_p:n_p + n_b])})
        out = functional_call(model, state, tuple(primals[n_p + n_b:]))
        if not buffers:
            return out
        return (*(out if isinstance(out, (tuple, list)) else (out,)), *[state[k] for k in buffers])

    step = aot_function(fn, fw_compiler=compiler("forward"), bw_compiler=compiler("backward"),
                        partition_fn=partition, decompositions=decompositions())
    held = dict(model.named_buffers())
    primals = [p.detach().requires_grad_(True) for p in model.parameters()] + \
        [held[k].detach().clone() for k in buffers] + \
        [x.detach().requires_grad_(x.is_floating_point()) if isinstance(x, torch.Tensor) else x for x in inputs]
    out = step(*primals)
    outs = out if isinstance(out, (tuple, list)) else (out,)
    g = torch.Generator().manual_seed(0)
    torch.autograd.backward([o for o in outs if o.requires_grad],
                            [torch.randn(o.shape, generator=g, dtype=o.dtype) for o in outs if o.requires_grad])
    if "backward" not in got:
        raise AkgError("the program's outputs do not depend on anything that needs a gradient: nothing to "
                       "write for --backward")
    return got["forward"], got["backward"]


def translate_backward(problem_path: str | Path, dsl: str, target: str, out: str | Path,
                       seeds: tuple[int, ...] = (0, 1)) -> list[str]:
    """Write `out` (and its folder of two graphs); returns the report's lines."""
    problem = load_problem(problem_path)
    model = problem.build_model(0).train()
    inputs = problem.make_inputs(0)
    buffers = updated_buffers(model, inputs)
    fw, bw = _capture(model, inputs, buffers)
    out = Path(out)
    folder = out.parent / f"{out.stem}_akg"
    folder.mkdir(parents=True, exist_ok=True)
    opts = Options(dsl=dsl, target=target, cache_dir=str(folder / "cache"), seeds=seeds)
    lines, entries = [], {}
    for kind, cap in (("forward", fw), ("backward", bw)):
        rep = GraphReport(kind, dsl, target)
        graph = CompiledGraph(cap["gm"], opts, rep, kind=kind)
        graph(*cap["args"])  # written, verified and cached here; a failure is one line
        if rep.torch_sizes or not graph.entries:
            raise AkgError(f"{Path(problem_path).name}: the {kind} graph could not be written: "
                           f"{rep.notes[-1] if rep.notes else 'no module'}")
        entries[kind] = str(graph.entries[-1].relative_to(folder))
        lines.append(rep.line())
    held = [n for n in bw["gm"].graph.nodes if n.op == "placeholder"]
    n_tangents = sum(1 for n in held if n.name.startswith("tangents"))
    n_saved = len(held) - n_tangents
    n_fw = len(next(n for n in fw["gm"].graph.nodes if n.op == "output").args[0])
    # a model whose training forward differs from its eval one is written for training only: batch norm, or
    # a forward that draws random numbers (a dropout module or `F.dropout(x, p, self.training)`)
    mode = bool(buffers) or bool(draws_random(fw["gm"])) or any(
        isinstance(m, (torch.nn.modules.batchnorm._BatchNorm, torch.nn.Dropout)) for m in model.modules())
    meta = {"params": len(list(model.parameters())), "user_outputs": n_fw - n_saved - len(buffers),
            "buffers": buffers, "tangents": n_tangents, "saved": n_saved, "training_only": mode, **entries,
            "inputs": [[list(x.shape), str(x.dtype)] if isinstance(x, torch.Tensor) else None for x in inputs]}
    (folder / "step.json").write_text(json.dumps(meta, indent=1))
    (folder / "problem.py").write_text(Path(problem_path).read_text())
    calls = sorted({c for e in entries.values() for c in _declared(folder / e / "module.py")})
    out.write_text(_MODULE.format(problem=Path(problem_path).name, dsl=dsl, target=target, folder=folder.name,
                                  stem=out.stem.replace("-", "_"), where=str(folder.resolve()), calls=calls))
    return lines


def _declared(module: Path) -> list[str]:
    """A written module's AKG_LIBRARY_CALLS, read without importing it."""
    for node in ast.parse(module.read_text()).body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "AKG_LIBRARY_CALLS"
                                                for t in node.targets):
            return list(ast.literal_eval(node.value))
    return []


def load_step(folder: Path) -> Callable[..., Any]:
    """The forward-and-backward step a written `--backward` module runs."""
    meta = json.loads((folder / "step.json").read_text())
    fw, bw = load_written(folder / meta["forward"]), load_written(folder / meta["backward"])
    n_user, buffers = meta["user_outputs"], meta.get("buffers", [])
    n_grads = meta.get("tangents", n_user)

    class Step(torch.autograd.Function):
        """Returns the outputs, then the written buffers' new values (no gradient: copied in by `step`)."""

        @staticmethod
        def forward(ctx: Any, *primals: Any) -> Any:  # type: ignore[override]
            outs = fw(*primals)
            kept = n_user + len(buffers)
            ctx.save_for_backward(*[o for o in outs[kept:] if isinstance(o, torch.Tensor)])
            ctx.mark_non_differentiable(*outs[n_user:kept])
            return tuple(outs[:kept])

        @staticmethod
        def backward(ctx: Any, *grads: Any) -> Any:  # type: ignore[override]
            return tuple(bw(*ctx.saved_tensors, *[g.contiguous() for g in grads[:n_grads]]))

    def step(model: torch.nn.Module, *inputs: Any) -> Any:
        if meta.get("training_only") and not model.training:
            raise ValueError("this --backward module was written for training mode (batch norm or dropout "
                             "behave otherwise in eval): call .train(), or translate without --backward")
        for i, (x, want) in enumerate(zip(inputs, meta.get("inputs", []))):
            if want is not None and isinstance(x, torch.Tensor) and [list(x.shape), str(x.dtype)] != want:
                raise ValueError(f"ModelNew input {i} is {str(x.dtype).replace('torch.', '')} {list(x.shape)}; "
                                 f"this --backward module was written and verified for "
                                 f"{want[1].replace('torch.', '')} {want[0]} only: translate again with "
                                 "--backward at these sizes")
        held = dict(model.named_buffers())
        outs = Step.apply(*model.parameters(), *[held[k] for k in buffers], *inputs)
        with torch.no_grad():
            for k, v in zip(buffers, outs[n_user:]):
                held[k].copy_(v)
        return outs[0] if n_user == 1 else tuple(outs[:n_user])

    return step
