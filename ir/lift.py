"""Lifting: a KernelBench problem -> graph IR, through torch.export with fake inputs.

torch.export (non-strict) keeps PyTorch's high-level ATen ops (linear, conv2d, softmax,
layer_norm, ...), which map one-to-one onto IR ops; `ir.aten` holds that table. Parameters keep
their state_dict names and real values; inputs are fake tensors, so only shapes are computed.
"""

from __future__ import annotations

import contextlib
import inspect
import operator
import threading
from typing import Any

import torch
import torch.fx
from torch.utils._python_dispatch import TorchDispatchMode

from . import aten, aten_grad, cells  # noqa: F401 - fill CONVERTERS
from .convert import CONVERTERS, LiftCtx, source_line
from .dynamic import DynamicDims
from .errors import AkgError
from .graph import Graph, Node
from .port.launch import HOP, captured, lift_launch
from .problem import Problem, _first_line
from .rnn_trace import traced_as_one_op
from .sym import size, symbol_names
from .types import TensorType, dtype_of

# torch.export and fake tensor modes keep global state: one export at a time in a process (the
# bench translates and verifies problems from several threads)
_EXPORT_LOCK = threading.Lock()


def _export(problem: Problem, model: torch.nn.Module, dims: DynamicDims | None = None) -> torch.export.ExportedProgram:
    try:
        with _EXPORT_LOCK:
            mode, fake = problem.fake_inputs()
            if dims is not None:
                with mode:
                    fake = dims.grown(fake)
            shapes = dims.export_shapes(fake) if dims is not None else None
            with traced_as_one_op(), captured():
                return torch.export.export(model, tuple(fake), strict=False, dynamic_shapes=shapes)
    except AkgError:
        raise
    except Exception as e:  # noqa: BLE001 - torch.export raises many kinds
        if dims is not None:  # the program as written does not run with those dimensions varying
            raise AkgError(f"--dynamic {dims.spec}: {problem.path.name} fixes a size named there "
                           f"({_first_line(e)[:300]}); leave that dimension static") from None
        raise AkgError(f"torch.export could not trace {problem.path.name}: {_first_line(e)}; "
                       "forward must run on get_inputs() without data-dependent Python control flow") from None


def lift(problem: Problem, *, train: bool = False, allow_opaque: bool = False,
         seed: int = 0, dynamic: str | None = None, dynamic_at: tuple[str, int] | None = None) -> Graph:
    """The problem's Model (weights from `seed`) as a graph. Modules are lifted in eval mode unless
    `train` (KernelBench never calls eval(): dropout and batch-norm statistics differ). `dynamic`: the
    input dimensions that vary at run time (`ir.dynamic`); their sizes are `ir.sym.Dyn` in the graph,
    traced at their bounds, or one of them at `dynamic_at` (name, a schedule bucket's largest size)."""
    model = problem.build_model(seed)
    model.train(train)
    dims = DynamicDims.parse(dynamic, problem, at=dynamic_at) if dynamic else None
    ep = _export(problem, model, dims)
    names = dims.symbol_names(ep) if dims is not None else {}
    with symbol_names(names):
        g = _lift_graph(problem, model, ep, train, allow_opaque)
    if dims is not None:
        g.meta["dynamic"] = dims.describe(g)
    return g


def _lift_graph(problem: Problem, model: torch.nn.Module, ep: torch.export.ExportedProgram, train: bool,
                allow_opaque: bool) -> Graph:
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
        if isinstance(a, torch.SymInt):
            return size(a)
        return a

    buffers: dict[torch.fx.Node, str] = {}  # placeholder -> the buffer's state_dict key
    mutated: dict[str, Node] = {}  # buffer key -> its value after forward, where forward writes it
    inputs: list[tuple[str, Any]] = []  # user inputs in order: (graph input name, None) or (name, number)
    for n in ep.graph.nodes:
        cx.fx_node = n
        if n.op == "placeholder":
            spec = sig[n.name]
            kind = spec.kind.name
            if kind == "USER_INPUT":
                val = n.meta["val"]
                if isinstance(val, torch.Tensor):
                    env[n] = g.input(n.name, TensorType(tuple(size(d) for d in val.shape),
                                                        dtype_of(val.dtype)))
                    inputs.append((n.name, None))
                else:  # a Python number: torch.export specialises it (the module checks it at run time)
                    env[n] = val
                    inputs.append((n.name, val))
            else:
                key = spec.target
                if kind == "BUFFER":
                    buffers[n] = key
                t = state.get(key)
                if t is None:
                    t = consts.get(key)
                if t is None:
                    t = model.get_buffer(key) if kind == "BUFFER" else model.get_parameter(key)
                env[n] = g.param(key, t.detach(), name=n.name)  # the model is this lift's own: no copy
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
            if name == HOP:  # a Triton launch: the tensors it writes take their new values
                kw = {k: value(v) for k, v in n.kwargs.items()}
                kw["kwargs"] = {k: value(v) for k, v in n.kwargs["kwargs"].items()}
                for arg, new in lift_launch(cx, **kw, fx_args=n.kwargs["kwargs"]).items():
                    old = kw["kwargs"][arg]
                    for k, v in list(env.items()):
                        if v is old:
                            env[k] = new
                continue
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
            if out is NotImplemented:  # the converter handles some forms of the op, not this one
                env[n] = _opaque(cx, n, name, args, kwargs, path)
                continue
            env[n] = out
            base = name.split(".")[1] if "." in name else name
            if base.endswith("_") and not base.endswith("__") and args and isinstance(args[0], Node):
                # an in-place op: later reads of its operand see the new value, and a module buffer
                # written in place is state the written module must update the same way
                for k, v in list(env.items()):
                    if v is args[0]:
                        env[k] = out
                if n.args and n.args[0] in buffers:
                    mutated[buffers[n.args[0]]] = out
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
            # buffers written in place: their new values follow the user's outputs
            g.meta["mutations"] = list(mutated)
            for v in mutated.values():
                if v.op in ("input", "param") or v in g.outputs:
                    v = g.add("reshape", [v], {"shape": list(v.shape)}, name=f"{v.name}_state")
                g.outputs.append(v)
    g.cleanup()
    g.meta["opaque"] = cx.opaque
    g.meta["signature"] = _signature(problem, inputs)
    return g


def _signature(problem: Problem, inputs: list[tuple[str, Any]]) -> list[tuple[str, str | None, Any]]:
    """forward's parameters in order: (its name, the graph input it is, or None and the number it was
    traced with). The written module keeps the names; torch.export renames (lower-cases) them."""
    params = [p for p in inspect.signature(problem.model_cls.forward).parameters.values()
              if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)][1:]
    names = [p.name for p in params] if len(params) == len(inputs) else [n for n, _ in inputs]
    return [(name, None if value is not None else node, value) for name, (node, value) in zip(names, inputs)]


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
            path: str) -> Node | tuple[Node, ...]:
    where = source_line(n, path)
    if not cx.allow_opaque:
        raise AkgError(f"unsupported op {name} at {where}; rerun with --llm MODEL to have a model write it, "
                       "or --allow-opaque to leave it in torch")
    val = n.meta.get("val")
    several = isinstance(val, (tuple, list)) and bool(val) and all(isinstance(v, torch.Tensor) for v in val)
    if not isinstance(val, torch.Tensor) and not several:
        raise AkgError(f"unsupported op {name} at {where} returns {type(val).__name__}; --allow-opaque keeps "
                       "ops that return tensors")
    base = name.split(".")[1] if "." in name else name
    if several and (base.endswith("_") or any(r in base.lower() for r in RANDOM_OPS)):
        raise AkgError(f"unsupported op {name} at {where} returns several values and writes in place or draws "
                       "random numbers; --allow-opaque keeps such ops only where they return one tensor")
    tensors: list[Node] = []
    enc_args = _encode(list(args), tensors)
    enc_kwargs = tuple((k, _encode(v, tensors)) for k, v in kwargs.items()
                       if k not in ("device", "pin_memory", "layout"))
    cx.opaque.append(f"{name} at {where}")
    how = dict(target=name, args=enc_args, kwargs=enc_kwargs, dispatch=_dispatched(n))
    if not several:
        return cx.add("opaque", tensors, **how)
    # an op of several outputs (a router's topk: values and indices): one call per output read, each taking
    # its item (the op is deterministic and writes nothing, so the calls agree); unread ones are dropped
    return tuple(cx.add("opaque", tensors, **how, item=i) for i in range(len(val)))


RANDOM_OPS = ("rand", "dropout", "bernoulli", "normal", "uniform", "multinomial", "poisson", "exponential")


class _Recorder(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.ops: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        name = ".".join(str(func).split(".")[:2])
        if name not in self.ops:
            self.ops.append(name)
        return func(*args, **(kwargs or {}))


def _dispatched(n: torch.fx.Node) -> tuple[str, ...]:
    """The ATen ops an opaque op runs as (a composite such as linalg_inv calls helpers of its own), from
    a run on the fake values torch.export recorded: the module may call these and no others."""
    def val(a: Any) -> Any:
        return a.meta.get("val") if isinstance(a, torch.fx.Node) else a
    args, kwargs = torch.utils._pytree.tree_map(val, (n.args, n.kwargs))
    rec = _Recorder()
    fake = torch._guards.detect_fake_mode(n.meta.get("val"))
    try:
        with fake or contextlib.nullcontext(), rec:
            n.target(*args, **kwargs)  # type: ignore[operator]
    except Exception:  # noqa: BLE001 - without the record, only the op itself is declared
        return (".".join(str(n.target).split(".")[:2]),)
    # fake values take a composite's meta path: one_hot on real tensors checks its classes with aminmax and
    # scatters, on fake ones compares with an arange. A run on zeros of the same sizes (small ones) adds
    # what the real path calls
    tensors = [a for a in torch.utils._pytree.tree_leaves((args, kwargs)) if isinstance(a, torch.Tensor)]
    if sum(a.numel() for a in tensors) <= CONCRETE_DISPATCH_NUMEL:
        def zeros(a: Any) -> Any:
            return torch.zeros(a.shape, dtype=a.dtype) if isinstance(a, torch.Tensor) else a
        real = _Recorder()
        try:
            with real:
                n.target(*torch.utils._pytree.tree_map(zeros, args),  # type: ignore[operator]
                         **torch.utils._pytree.tree_map(zeros, kwargs))
        except Exception:  # noqa: BLE001 - zeros may not be valid operands: the fake record stands
            real.ops = []
        rec.ops += [op for op in real.ops if op not in rec.ops]
    return tuple(rec.ops)


CONCRETE_DISPATCH_NUMEL = 1 << 22  # operands up to this many elements are also run on zeros (milliseconds)
