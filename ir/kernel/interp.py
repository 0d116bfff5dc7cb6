"""The kernel-IR interpreter: evaluates kernels with torch over whole coordinate grids, so a
lowering bug shows up before any DSL is involved. Pointwise ops and library calls reuse the graph
interpreter's definitions (each op's meaning is defined once)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from ..interp import EvalCtx, eval_op
from ..types import DTYPES
from .ir import Const, Expr, IOp, Kernel, KernelProgram, LibraryCall, Load, Op, Reduce, Scan, Var, walk

_IOPS = {"+": torch.add, "-": torch.sub, "*": torch.mul, "//": torch.floor_divide, "%": torch.remainder,
         "min": torch.minimum, "max": torch.maximum, "<": torch.lt, "<=": torch.le, "==": torch.eq,
         "!=": torch.ne, ">=": torch.ge, ">": torch.gt, "and": torch.logical_and, "or": torch.logical_or}


class _Eval:
    def __init__(self, k: Kernel, env: dict[str, torch.Tensor], device: torch.device) -> None:
        self.env, self.device = env, device
        order: list[Var] = list(k.coords)
        for e in walk(k.expr):
            if isinstance(e, Reduce):
                order += [v for v in e.axes if v not in order]
            if isinstance(e, Scan) and e.axis not in order:
                order.append(e.axis)
        self.dim = {v.name: i for i, v in enumerate(order)}
        self.rank = len(order)
        self.memo: dict[int, torch.Tensor] = {}

    def var(self, v: Var) -> torch.Tensor:
        shape = [1] * self.rank
        shape[self.dim[v.name]] = v.extent
        return torch.arange(v.extent, device=self.device).view(shape)

    def __call__(self, e: Expr) -> torch.Tensor:
        key = id(e)
        if key in self.memo:
            return self.memo[key]
        r = self._eval(e)
        if r.dim() < self.rank:
            r = r.reshape(list(r.shape) + [1] * (self.rank - r.dim())) if r.dim() else r.reshape([1] * self.rank)
        self.memo[key] = r
        return r

    def _eval(self, e: Expr) -> torch.Tensor:
        if isinstance(e, Var):
            return self.var(e)
        if isinstance(e, Const):
            return torch.tensor(e.value, dtype=DTYPES[e.dtype], device=self.device)
        if isinstance(e, IOp):
            return _IOPS[e.op](self(e.a), self(e.b))
        if isinstance(e, Load):
            src = self.env[e.buf.name]
            idx = [self(i) for i in e.index]
            mask = self(e.mask) if e.mask is not None else None
            shape = torch.broadcast_shapes(*[i.shape for i in idx], *([mask.shape] if mask is not None else []))
            idx = [i.expand(shape) for i in idx]
            if mask is not None:
                mask = mask.expand(shape)
                idx = [torch.where(mask, i, torch.zeros_like(i)) for i in idx]  # masked lanes touch nothing
            val = src[tuple(idx)] if idx else src.reshape(()).expand(shape)
            if mask is not None:
                val = torch.where(mask, val, torch.tensor(e.other, dtype=val.dtype, device=self.device))
            return val
        if isinstance(e, Op):
            return eval_op(e.op, [self(a) for a in e.args], dict(e.attrs), EvalCtx(device=self.device))
        if isinstance(e, Reduce):
            body = self(e.body)
            dims = [self.dim[v.name] for v in e.axes]
            shape = list(body.shape)
            for d, v in zip(dims, e.axes):
                shape[d] = v.extent
            body = body.expand(shape)
            if e.op in ("sum", "dot"):
                return body.sum(dims, keepdim=True).to(DTYPES[e.dtype])
            if e.op == "max":
                return body.amax(dims, keepdim=True)
            if e.op == "min":
                return body.amin(dims, keepdim=True)
            if e.op == "prod":
                out = body
                for d in dims:
                    out = out.prod(d, keepdim=True)
                return out
            if e.op in ("argmax", "argmin"):
                keep = [d for d in range(body.dim()) if d not in dims]
                moved = body.permute(keep + dims)
                flat = moved.reshape(list(moved.shape[:len(keep)]) + [-1])
                idx = flat.argmax(-1) if e.op == "argmax" else flat.argmin(-1)
                return idx.reshape([moved.shape[i] for i in range(len(keep))] + [1] * len(dims)).permute(
                    _inverse(keep + dims))
        if isinstance(e, Scan):
            d = self.dim[e.axis.name]
            body = self(e.body).to(DTYPES[e.dtype])
            shape = list(body.shape)
            shape[d] = e.axis.extent
            body = body.expand(shape)
            fn = torch.cumsum if e.op == "sum" else torch.cumprod
            run = fn(body.flip(d), d).flip(d) if e.reverse else fn(body, d)
            at = self(e.at)  # output coordinates only: size 1 along the scanned axis
            shape = list(torch.broadcast_shapes(run.shape, at.shape))
            run = run.expand(shape)
            shape[d] = 1
            return torch.gather(run, d, at.expand(shape).to(torch.int64))
        raise TypeError(f"cannot evaluate {type(e).__name__}")


def _inverse(perm: Sequence[int]) -> list[int]:
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return inv


def eval_outputs(k: Kernel, env: dict[str, torch.Tensor], device: torch.device) -> list[torch.Tensor]:
    """Every output of `k` (`k.out`, then `k.also`'s), each evaluated once."""
    ev = _Eval(k, env, device)
    n = len(k.coords)
    outs = []
    for b, e in [(k.out, k.expr), *k.also]:
        r = ev(e)
        r = r.reshape(list(r.shape[:n]))  # drop the (size-1) reduction dimensions
        outs.append(r.expand(b.shape).to(DTYPES[b.dtype]).contiguous())
    return outs


def run_program(prog: KernelProgram, inputs: Sequence[torch.Tensor], weights: dict[str, torch.Tensor],
                consts: dict[str, Any] | None = None) -> list[torch.Tensor]:
    device = inputs[0].device if inputs else torch.device("cpu")
    env: dict[str, torch.Tensor] = {b.name: t for b, t in zip(prog.inputs, inputs)}
    env.update({b.name: weights[b.key].to(device) for b in prog.params})
    for step in prog.steps:
        if isinstance(step, Kernel):
            env.update(zip((b.name for b in step.outs()), eval_outputs(step, env, device)))
        else:
            env[step.out.name] = run_library(step, env, device)
    return [env[b.name] for b in prog.outputs]


def run_library(step: LibraryCall, env: dict[str, torch.Tensor], device: torch.device) -> torch.Tensor:
    args = [env[b.name] if b is not None else None for b in step.args]
    return eval_op(step.op, args, step.attrs, EvalCtx(device=device))
