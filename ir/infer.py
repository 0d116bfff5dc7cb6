"""Type inference: run the interpreter's own definition on meta tensors (no data, no memory)."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import torch

from .interp import EvalCtx, eval_op
from .sym import PREFIX, TRACED, Dyn, DynamicDecision, keep_symints, size, symbol
from .types import TensorType, dtype_of


def _hashable(attrs: dict[str, Any]) -> tuple:
    return tuple(sorted(attrs.items()))


def infer_type(op: str, arg_types: list[TensorType | None], attrs: dict[str, Any]) -> TensorType:
    # the key spells run-time sizes out: a size traced at 64 and the constant 64 are different questions
    spelled = repr(_spell((tuple(arg_types), tuple(attrs.items())))) if _has_dyn(tuple(attrs.values())) or any(
        t is not None and any(isinstance(d, Dyn) for d in t.shape) for t in arg_types) else ""
    return _infer(op, tuple(arg_types), _hashable(attrs), spelled)


def _symbolic(op: str, arg_types: tuple[TensorType | None, ...], attrs: tuple) -> TensorType:
    """Inference with run-time sizes: the same definition on fake tensors whose sizes are torch symbols,
    so output sizes come back as expressions of the inputs' (`ir.sym.Dyn`)."""
    from torch._dynamo.source import ConstantSource
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    env = ShapeEnv()
    syms: dict[str, Any] = {}  # akg size name -> torch SymInt
    names: dict[str, str] = {}  # torch symbol -> akg size name

    def sym_of(d: int) -> Any:
        if not isinstance(d, Dyn):
            return d
        for name in sorted(d.symbols):
            if name not in syms:
                hint = _traced(_dyns((arg_types, attrs)), name)
                s = env.create_symbol(hint, source=ConstantSource(name))
                syms[name] = env.create_symintnode(s, hint=hint)
                names[str(s)] = name[len(PREFIX):]
        return eval(str(d), {}, dict(syms))  # noqa: S307 - an expression akg wrote itself

    def attr(v: Any) -> Any:
        return tuple(attr(x) for x in v) if isinstance(v, tuple) else sym_of(v) if isinstance(v, Dyn) else v

    try:
        with FakeTensorMode(shape_env=env, allow_non_fake_inputs=True), keep_symints():
            args = [torch.empty(tuple(sym_of(d) for d in t.shape), dtype=t.torch_dtype, device="meta")
                    if t is not None else None for t in arg_types]
            out = eval_op(op, args, {k: attr(v) for k, v in attrs}, EvalCtx(device="meta"))
    except Exception:  # noqa: BLE001 - a definition torch cannot run on symbolic sizes (random draws)
        return _affine(op, arg_types, attrs, sorted(syms))
    if any(str(s) in names for s in env.replacements):  # torch's definition fixed a size: measure instead
        return _affine(op, arg_types, attrs, sorted(syms))
    return TensorType(tuple(size(d, names) for d in out.shape), dtype_of(out.dtype))


def _affine(op: str, arg_types: tuple[TensorType | None, ...], attrs: tuple, syms: list[str]) -> TensorType:
    """Output sizes as affine functions of each run-time size, read off evaluations at the traced sizes
    and at two larger ones per size (a definition that fixes a size, such as torch's pad, still has an
    output that grows with its input); a size that is not affine is an error, never a guess."""
    base = {n: _traced(_dyns((arg_types, attrs)), n) for n in syms}

    def at(values: dict[str, int]) -> tuple[tuple[int, ...], str]:
        def conc(v: Any) -> Any:
            if isinstance(v, tuple):
                return tuple(conc(x) for x in v)
            return eval(str(v), {}, dict(values)) if isinstance(v, Dyn) else v  # noqa: S307 - akg's own text
        types = tuple(TensorType(tuple(conc(d) for d in t.shape), t.dtype) if t is not None else None
                      for t in arg_types)
        r = _infer(op, types, tuple((k, conc(v)) for k, v in attrs))
        return r.shape, r.dtype

    shape0, dtype = at(base)
    dims: list[int] = list(shape0)
    for n in syms:
        s1, _ = at({**base, n: base[n] + 1})
        s2, _ = at({**base, n: base[n] + 2})
        for i, (a, b, c) in enumerate(zip(shape0, s1, s2)):
            if b - a != c - b:
                raise DynamicDecision(f"the output size of {op} is not an affine function of {n[len(PREFIX):]}; "
                                      "leave that dimension static")
            if b != a:
                dims[i] = dims[i] + (b - a) * (symbol(n[len(PREFIX):], base[n]) - base[n])
    return TensorType(tuple(dims), dtype)


def _spell(v: Any) -> Any:
    """A key that tells run-time sizes apart by expression and traced value (a graph traced at 16 and one
    traced at 4096 ask different questions of the same expression)."""
    if isinstance(v, Dyn):
        return (str(v), int(v))
    if isinstance(v, TensorType):
        return (tuple(_spell(d) for d in v.shape), v.dtype, v.layout)
    if isinstance(v, tuple):
        return tuple(_spell(x) for x in v)
    return v


def _has_dyn(v: Any) -> bool:
    return isinstance(v, Dyn) or (isinstance(v, tuple) and any(_has_dyn(x) for x in v))


def _dyns(v: Any) -> list[Dyn]:
    if isinstance(v, Dyn):
        return [v]
    if isinstance(v, TensorType):
        return _dyns(v.shape)
    if isinstance(v, tuple):
        return [d for x in v for d in _dyns(x)]
    return []


def _traced(found: list[Dyn], name: str) -> int:
    """The traced value of size symbol `name`, solved from a size affine in it alone (c * name + k)
    among `found`; the value last traced in this process only where none is."""
    for d in found:
        terms = dict(d.poly)
        if set(terms) <= {(name,), ()} and (name,) in terms:
            return (int(d) - terms.get((), 0)) // terms[(name,)]
    return TRACED.get(name, 2)


@lru_cache(maxsize=8192)
def _infer(op: str, arg_types: tuple[TensorType | None, ...], attrs: tuple, spelled: str = "") -> TensorType:
    if op in ("input", "param"):
        raise ValueError(f"{op} nodes carry their type explicitly")
    if any(t is not None and any(isinstance(d, Dyn) for d in t.shape) for t in arg_types) or _has_dyn(attrs):
        return _symbolic(op, arg_types, attrs)
    args = [torch.empty(t.shape, dtype=t.torch_dtype, device="meta") if t is not None else None
            for t in arg_types]
    try:
        out = eval_op(op, args, dict(attrs), EvalCtx(device="meta"))
    except NotImplementedError:
        # a few ops (data-dependent kernels) have no meta kernel: fall back to tiny real data
        args = [torch.zeros(t.shape, dtype=t.torch_dtype) if t is not None else None for t in arg_types]
        out = eval_op(op, args, dict(attrs), EvalCtx(device="cpu"))
    return TensorType(tuple(int(d) for d in out.shape), dtype_of(out.dtype))
