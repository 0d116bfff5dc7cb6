"""The recurrent layers (nn.RNN, nn.LSTM, nn.GRU) as one composite op, `recurrence`, whose meaning is
its decomposition into primitives, written once here like every composite (ir.decompose).

Operands: x, h0, c0 (LSTM only, else None), then the weights in torch's `_flat_weights` order:
per layer, per direction, w_ih, w_hh (and b_ih, b_hh when `has_biases`). `result` picks which of
torch's results the node is (`output`, `h_n` or `c_n`): a layer read for two results lifts as two
nodes whose decompositions are the same primitives, which CSE merges into one computation.

The decomposition is the schedule kernel engineers use: each layer and direction projects the
inputs of every time step at once (one GEMM of T*B rows), then each step is a small GEMM of the
hidden state (its bias folded in) followed by the gate arithmetic, which fusion puts in one kernel.
"""

from __future__ import annotations

from typing import Any

import torch

from .decompose import DECOMPOSITIONS, EagerEmitter, Emitter, decomposition
from .interp import COMPOSITES

CELLS = ("lstm", "gru", "rnn_tanh", "rnn_relu")
RESULTS = ("output", "h_n", "c_n")  # what torch returns, in order (c_n: LSTM only)
STACK_FANIN = 8


def _rows(e: Emitter, v: Any, start: int, end: int, dim: int = 0) -> Any:
    return e.emit("slice", [v], dim=dim, start=start, end=end, step=1)


def _cell(e: Emitter, cell: str, xp: Any, hp: Any, h: Any, c: Any, hid: int) -> tuple[Any, Any]:
    """One step: xp = x_t W_ih^T + b_ih, hp = h W_hh^T + b_hh (both [B, gates*H]) -> new (h, c)."""
    if cell in ("rnn_tanh", "rnn_relu"):
        pre = e.emit("add", [xp, hp])
        return e.emit("tanh" if cell == "rnn_tanh" else "relu", [pre]), None
    if cell == "lstm":  # gate order i, f, g, o
        g = e.emit("add", [xp, hp])
        i, f, gg, o = (_rows(e, g, k * hid, (k + 1) * hid, dim=1) for k in range(4))
        c2 = e.emit("add", [e.emit("mul", [e.emit("sigmoid", [f]), c]),
                            e.emit("mul", [e.emit("sigmoid", [i]), e.emit("tanh", [gg])])])
        return e.emit("mul", [e.emit("sigmoid", [o]), e.emit("tanh", [c2])]), c2
    # gru, gate order r, z, n: n = tanh(xn + r * hn); h' = (1 - z) n + z h = n + z (h - n)
    r = e.emit("sigmoid", [e.emit("add", [_rows(e, xp, 0, hid, 1), _rows(e, hp, 0, hid, 1)])])
    z = e.emit("sigmoid", [e.emit("add", [_rows(e, xp, hid, 2 * hid, 1), _rows(e, hp, hid, 2 * hid, 1)])])
    n = e.emit("tanh", [e.emit("add", [_rows(e, xp, 2 * hid, 3 * hid, 1),
                                       e.emit("mul", [r, _rows(e, hp, 2 * hid, 3 * hid, 1)])])])
    return e.emit("add", [n, e.emit("mul", [z, e.emit("sub", [h, n])])]), None


def _state(e: Emitter, s: Any, k: int, b: int, hid: int) -> Any:
    return e.emit("reshape", [_rows(e, s, k, k + 1)], shape=[b, hid])


def _stack(e: Emitter, vs: list[Any], b: int, hid: int) -> Any:
    """[B, H] values -> [len(vs), B, H], as a tree of concats of at most STACK_FANIN operands: a concat's
    kernel reads each output element through a choice among its operands, so one concat of every
    step would cost as many loads per element as there are steps."""
    parts = [e.emit("reshape", [v], shape=[1, b, hid]) for v in vs]
    while len(parts) > 1:
        parts = [p[0] if len(p) == 1 else e.emit("concat", p, dim=0)
                 for p in (parts[i:i + STACK_FANIN] for i in range(0, len(parts), STACK_FANIN))]
    return parts[0]


@decomposition("recurrence")
def _recurrence(e, a, at):
    cell, hid, layers = at["cell"], at["hidden"], at["layers"]
    dirs = 2 if at["bidirectional"] else 1
    per = 4 if at["has_biases"] else 2
    x, h0, c0, *w = a
    if at["batch_first"]:
        x = e.emit("permute", [x], dims=[1, 0, 2])
    steps, b, _ = e.shape(x)
    layer_in = x
    h_n: list[Any] = []
    c_n: list[Any] = []
    for layer in range(layers):
        outs = []
        for d in range(dirs):
            k = layer * dirs + d
            w_ih, w_hh, *bias = w[k * per:(k + 1) * per]
            b_ih, b_hh = bias if bias else (None, None)
            feat = e.shape(layer_in)[2]
            flat = e.emit("reshape", [layer_in], shape=[steps * b, feat])
            proj = e.emit("linear", [flat, w_ih] + ([b_ih] if b_ih is not None else []))
            h = _state(e, h0, k, b, hid)
            c = _state(e, c0, k, b, hid) if cell == "lstm" else None
            hs: list[Any] = [None] * steps
            for t in (range(steps) if d == 0 else range(steps - 1, -1, -1)):
                hp = e.emit("linear", [h, w_hh] + ([b_hh] if b_hh is not None else []))
                h, c = _cell(e, cell, _rows(e, proj, t * b, (t + 1) * b), hp, h, c, hid)
                hs[t] = h
            h_n.append(h)
            c_n.append(c)
            outs.append(_stack(e, hs, b, hid))
        layer_in = outs[0] if dirs == 1 else e.emit("concat", outs, dim=2)
    res = at["result"]
    if res == "h_n":
        return _stack(e, h_n, b, hid)
    if res == "c_n":
        return _stack(e, c_n, b, hid)
    return e.emit("permute", [layer_in], dims=[1, 0, 2]) if at["batch_first"] else layer_in


def _evaluate(args: list[Any], attrs: dict[str, Any], ctx: Any) -> torch.Tensor:
    x = args[0]
    if x.device.type == "meta":  # type inference: the shape alone (the steps would take seconds at full size)
        steps, b = (x.shape[1], x.shape[0]) if attrs["batch_first"] else (x.shape[0], x.shape[1])
        dirs = 2 if attrs["bidirectional"] else 1
        if attrs["result"] != "output":
            return x.new_empty((attrs["layers"] * dirs, b, attrs["hidden"]))
        return x.new_empty((b, steps, dirs * attrs["hidden"]) if attrs["batch_first"] else
                           (steps, b, dirs * attrs["hidden"]))
    return DECOMPOSITIONS["recurrence"](EagerEmitter(ctx), list(args), attrs)


COMPOSITES["recurrence"] = _evaluate
