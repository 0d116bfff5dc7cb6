"""Recurrent layers traced as one op: while torch.export runs, nn.RNN/LSTM/GRU reach `akg::rnn`, a
custom op whose fake implementation gives the result shapes at once. Traced as ATen, torch's own
fake implementation runs every step of every layer on fake tensors: a minute for a 6-layer
bidirectional LSTM over 512 steps. Outside export (and for packed sequences) nothing changes; the
custom op's real implementation is torch's, so a module run meanwhile computes the same values."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import Any

import torch
import torch.nn.modules.rnn as rnn_module
from torch import Tensor

from .recurrence import CELLS


@dataclass(frozen=True)
class RnnSettings:
    """A recurrent layer stack's settings besides its tensors (torch._VF's arguments after the weights) as
    one value; `akg::rnn` carries it as text, which `parse` reads back."""

    cell: str
    has_biases: bool
    num_layers: int
    dropout: float
    train: bool
    bidirectional: bool
    batch_first: bool

    def text(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @staticmethod
    def parse(text: str) -> RnnSettings:
        return RnnSettings(**json.loads(text))

    def vf_args(self) -> tuple[Any, ...]:
        return (self.has_biases, self.num_layers, self.dropout, self.train, self.bidirectional, self.batch_first)


@torch.library.custom_op("akg::rnn", mutates_args=())
def rnn(x: Tensor, hx: list[Tensor], params: list[Tensor], settings: str) -> list[Tensor]:
    s = RnnSettings.parse(settings)
    h = tuple(hx) if s.cell == "lstm" else hx[0]
    return [t.clone() for t in getattr(torch._C._VF, s.cell)(x, h, params, *s.vf_args())]


@rnn.register_fake
def _(x, hx, params, settings):
    s = RnnSettings.parse(settings)
    dirs = 2 if s.bidirectional else 1
    hid = params[1].shape[1]
    steps, b = (x.shape[1], x.shape[0]) if s.batch_first else (x.shape[0], x.shape[1])
    out = x.new_empty((b, steps, dirs * hid) if s.batch_first else (steps, b, dirs * hid))
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
            return tuple(rnn(x, hx, list(params), RnnSettings(name, *rest).text()))
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
