"""Lifting: a KernelBench problem -> graph IR, through torch.export with fake inputs.

torch.export (non-strict) keeps PyTorch's high-level ATen ops (linear, conv2d, softmax,
layer_norm, ...), which map one-to-one onto IR ops; `ir.aten` holds that table. Parameters keep
their state_dict names and real values; inputs are fake tensors, so only shapes are computed.
"""

from __future__ import annotations

import operator
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx

from .errors import AkgError
from .graph import Graph, Node
from .problem import Problem, _first_line
from .types import FLOAT_DTYPES, TensorType, dtype_of


@dataclass
class LiftCtx:
    graph: Graph
    fx_node: torch.fx.Node | None = None
    allow_opaque: bool = False
    opaque: list[str] = field(default_factory=list)

    # --- helpers used by converters
    def add(self, op: str, args: list[Node | None], /, **attrs: Any) -> Node:
        hint = self.fx_node.name if self.fx_node is not None else op
        n = self.graph.add(op, args, attrs, name=hint)
        if self.fx_node is not None:
            n.meta["source"] = source_line(self.fx_node)
        return n

    def out_shape(self) -> list[int]:
        val = self.fx_node.meta["val"] if self.fx_node is not None else None
        return [int(d) for d in val.shape]

    def scalar(self, value: Any, like: Node | None = None) -> Node:
        """A Python number as a 0-d `scalar` node that promotes like a Python number would."""
        if isinstance(value, Node):
            return value
        like_dt = like.dtype if like is not None else "f32"
        if isinstance(value, bool):
            dt = "bool"
        elif isinstance(value, float) or like_dt in FLOAT_DTYPES:
            dt, value = (like_dt if like_dt in FLOAT_DTYPES else "f32"), float(value)
        else:
            dt = like_dt if like_dt not in ("bool",) else "i64"
        return self.graph.add("scalar", [], {"value": value, "dtype": dt}, name="c")


Converter = Callable[..., Any]
CONVERTERS: dict[str, Converter] = {}


def converts(*targets: str) -> Callable[[Converter], Converter]:
    def reg(fn: Converter) -> Converter:
        for t in targets:
            CONVERTERS[t] = fn
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


# torch.export and fake tensor modes keep global state: one export at a time in a process (the
# bench translates and verifies problems from several threads)
_EXPORT_LOCK = threading.Lock()


def _export(problem: Problem, model: torch.nn.Module) -> torch.export.ExportedProgram:
    try:
        with _EXPORT_LOCK:
            mode, fake = problem.fake_inputs()
            return torch.export.export(model, tuple(fake), strict=False)
    except Exception as e:  # noqa: BLE001 - torch.export raises many kinds
        raise AkgError(f"torch.export could not trace {problem.path.name}: {_first_line(e)}; "
                       "forward must run on get_inputs() without data-dependent Python control flow") from None


def lift(problem: Problem, *, train: bool = False, allow_opaque: bool = False,
         seed: int = 0) -> Graph:
    """The problem's Model (weights from `seed`) as a graph. Modules are lifted in eval mode unless
    `train` (KernelBench never calls eval(): dropout and batch-norm statistics differ)."""
    from . import aten  # noqa: F401 - fills CONVERTERS

    model = problem.build_model(seed)
    model.train(train)
    ep = _export(problem, model)
    g = Graph(problem.model_cls.__name__)
    g.meta.update(train=train, problem=str(problem.path))
    cx = LiftCtx(g, allow_opaque=allow_opaque)
    sig = {s.arg.name: s for s in ep.graph_signature.input_specs}
    named_params = dict(model.named_parameters())
    g.meta["state_dict"] = [(k, tuple(int(d) for d in v.shape), dtype_of(v.dtype),
                             "parameter" if k in named_params else "buffer")
                            for k, v in model.state_dict().items()]
    consts = dict(ep.constants)
    state = dict(model.state_dict(keep_vars=False))
    env: dict[torch.fx.Node, Any] = {}
    path = str(problem.path)

    def value(a: Any) -> Any:
        if isinstance(a, torch.fx.Node):
            return env[a]
        if isinstance(a, (list, tuple)):
            return type(a)(value(x) for x in a)
        return a

    for n in ep.graph.nodes:
        cx.fx_node = n
        if n.op == "placeholder":
            spec = sig[n.name]
            kind = spec.kind.name
            if kind == "USER_INPUT":
                val = n.meta["val"]
                if isinstance(val, torch.Tensor):
                    env[n] = g.input(n.name, TensorType(tuple(int(d) for d in val.shape),
                                                        dtype_of(val.dtype)))
                else:
                    env[n] = val
            else:
                key = spec.target
                t = state.get(key)
                if t is None:
                    t = consts.get(key)
                if t is None:
                    t = model.get_buffer(key) if kind == "BUFFER" else model.get_parameter(key)
                env[n] = g.param(key, t.detach().clone(), name=n.name)
                kinds = g.meta.setdefault("param_kinds", {})
                kinds[key] = ("parameter" if kind == "PARAMETER" else
                              "buffer" if kind == "BUFFER" and getattr(spec, "persistent", True) else
                              "buffer_np" if kind == "BUFFER" else "constant")
        elif n.op == "call_function":
            target = n.target
            if target is operator.getitem:
                env[n] = env[n.args[0]][n.args[1]]
                continue
            name = str(target)
            conv = CONVERTERS.get(name)
            args, kwargs = value(n.args), {k: value(v) for k, v in n.kwargs.items()}
            if conv is None:
                env[n] = _opaque(cx, n, name, args, kwargs, path)
                continue
            try:
                out = conv(cx, *args, **kwargs)
            except AkgError:
                raise
            except Exception as e:  # noqa: BLE001 - a converter bug must still be one line
                raise AkgError(f"could not lift {name} at {source_line(n, path)}: {_first_line(e)}") from None
            env[n] = out
            if name.endswith("_.default") and args and isinstance(args[0], Node):
                # an in-place op: later reads of its operand see the new value
                for k, v in list(env.items()):
                    if v is args[0]:
                        env[k] = out
        elif n.op == "output":
            outs = n.args[0]
            g.meta["single_output"] = ep.call_spec.out_spec is not None and ep.call_spec.out_spec.is_leaf()
            user = [o for o, s in zip(outs, ep.graph_signature.output_specs) if s.kind.name == "USER_OUTPUT"]
            g.outputs = []
            for o in user:
                v = env[o]
                if not isinstance(v, Node):
                    raise AkgError(f"{problem.path.name}: forward returns a non-tensor ({type(v).__name__}); "
                                   "akg needs tensor outputs")
                if v.op == "input" or v in g.outputs:  # an output must be a value of its own
                    v = g.add("reshape", [v], {"shape": list(v.shape)}, name=f"{v.name}_out")
                g.outputs.append(v)
    g.cleanup()
    g.meta["opaque"] = cx.opaque
    return g


def _encode(v: Any, tensors: list[Node]) -> Any:
    if isinstance(v, Node):
        tensors.append(v)
        return f"${len(tensors) - 1}"
    if isinstance(v, str):
        return "$" + v if v.startswith("$") else v
    if isinstance(v, (list, tuple)):
        return tuple(_encode(x, tensors) for x in v)
    if isinstance(v, torch.dtype):
        return v
    if v is None or isinstance(v, (bool, int, float)):
        return v
    raise AkgError(f"cannot keep an argument of type {type(v).__name__} in an opaque op")


def _opaque(cx: LiftCtx, n: torch.fx.Node, name: str, args: Any, kwargs: dict[str, Any],
            path: str) -> Node:
    where = source_line(n, path)
    if not cx.allow_opaque:
        raise AkgError(f"unsupported op {name} at {where}; rerun with --allow-opaque to leave it in torch")
    if not isinstance(n.meta.get("val"), torch.Tensor):
        raise AkgError(f"unsupported op {name} at {where} returns several values; --allow-opaque keeps "
                       "only single-tensor ops")
    tensors: list[Node] = []
    enc_args = _encode(list(args), tensors)
    enc_kwargs = tuple((k, _encode(v, tensors)) for k, v in kwargs.items()
                       if k not in ("device", "pin_memory", "layout"))
    cx.opaque.append(f"{name} at {where}")
    return cx.add("opaque", tensors, target=name, args=enc_args, kwargs=enc_kwargs)
