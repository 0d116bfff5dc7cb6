"""Recurrent layers traced as one op: while torch.export runs, nn.RNN/LSTM/GRU reach `akg::rnn`, a
custom op whose fake implementation gives the result shapes at once. Traced as ATen, torch's own
fake implementation runs every step of every layer on fake tensors: a minute for a 6-layer
bidirectional LSTM over 512 steps. Outside export (and for packed sequences) nothing changes; the
custom op's real implementation is torch's, so a module run meanwhile computes the same values."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch
import torch.nn.modules.rnn as rnn_module
from torch import Tensor

from .recurrence import CELLS


@torch.library.custom_op("akg::rnn", mutates_args=())
def rnn(cell: str, x: Tensor, hx: list[Tensor], params: list[Tensor], has_biases: bool, num_layers: int,
        dropout: float, train: bool, bidirectional: bool, batch_first: bool) -> list[Tensor]:
    fn = getattr(torch._C._VF, cell)
    h = tuple(hx) if cell == "lstm" else hx[0]
    return [t.clone() for t in fn(x, h, params, has_biases, num_layers, dropout, train, bidirectional, batch_first)]


@rnn.register_fake
def _(cell, x, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first):
    dirs = 2 if bidirectional else 1
    hid = params[1].shape[1]
    steps, b = (x.shape[1], x.shape[0]) if batch_first else (x.shape[0], x.shape[1])
    out = x.new_empty((b, steps, dirs * hid) if batch_first else (steps, b, dirs * hid))
    return [out] + [x.new_empty(tuple(h.shape)) for h in hx]


class _Shim:
    """Stands in for `torch._VF` inside torch.nn.modules.rnn: the four cells go to `akg::rnn`."""

    def __init__(self, vf: Any) -> None:
        self._vf = vf

    def __getattr__(self, name: str) -> Any:
        orig = getattr(self._vf, name)
        if name not in CELLS:
            return orig

        def call(*args: Any) -> Any:
            if len(args) != 9 or not isinstance(args[3], bool):  # a packed sequence: torch's own path
                return orig(*args)
            x, hx, params, *rest = args
            hx = list(hx) if name == "lstm" else [hx]
            return tuple(rnn(name, x, hx, list(params), *rest))
        return call


@contextlib.contextmanager
def traced_as_one_op() -> Iterator[None]:
    """Callers hold the export lock: the shim is process-wide while it is in place."""
    vf = rnn_module._VF
    rnn_module._VF = _Shim(vf)  # type: ignore[assignment]
    try:
        yield
    finally:
        rnn_module._VF = vf
