"""Recurrent cells called one step at a time (nn.LSTMCell, nn.GRUCell, nn.RNNCell): ATen's *_cell ops
lifted as the GEMMs and gate arithmetic torch defines them by, so a loop over steps in forward becomes
ordinary graph nodes (the whole-sequence layers are `ir.recurrence`)."""

from __future__ import annotations

from typing import Any

from .convert import LiftCtx, converts
from .graph import Node


def _affine(cx: LiftCtx, x: Node, h: Node, w_ih: Node, w_hh: Node, b_ih: Node | None,
            b_hh: Node | None) -> tuple[Node, Node]:
    gi = cx.add("linear", [x, w_ih] + ([b_ih] if b_ih is not None else []))
    gh = cx.add("linear", [h, w_hh] + ([b_hh] if b_hh is not None else []))
    return gi, gh


def _gate(cx: LiftCtx, t: Node, k: int, n: int) -> Node:
    """The k-th of n equal chunks along dimension 1 (torch's gate order)."""
    size = t.shape[1] // n
    return cx.add("slice", [t], dim=1, start=k * size, end=(k + 1) * size, step=1)


@converts("aten.lstm_cell.default")
def _lstm_cell(cx: LiftCtx, x: Node, hx: Any, w_ih: Node, w_hh: Node, b_ih: Node | None = None,
               b_hh: Node | None = None) -> tuple[Node, Node]:
    h, c = hx
    gi, gh = _affine(cx, x, h, w_ih, w_hh, b_ih, b_hh)
    gates = cx.add("add", [gi, gh])
    i, f, g, o = (_gate(cx, gates, k, 4) for k in range(4))
    i, f, o = (cx.add("sigmoid", [t]) for t in (i, f, o))
    c2 = cx.add("add", [cx.add("mul", [f, c]), cx.add("mul", [i, cx.add("tanh", [g])])])
    return cx.add("mul", [o, cx.add("tanh", [c2])]), c2


@converts("aten.gru_cell.default")
def _gru_cell(cx: LiftCtx, x: Node, h: Node, w_ih: Node, w_hh: Node, b_ih: Node | None = None,
              b_hh: Node | None = None) -> Node:
    gi, gh = _affine(cx, x, h, w_ih, w_hh, b_ih, b_hh)
    r = cx.add("sigmoid", [cx.add("add", [_gate(cx, gi, 0, 3), _gate(cx, gh, 0, 3)])])
    z = cx.add("sigmoid", [cx.add("add", [_gate(cx, gi, 1, 3), _gate(cx, gh, 1, 3)])])
    n = cx.add("tanh", [cx.add("add", [_gate(cx, gi, 2, 3), cx.add("mul", [r, _gate(cx, gh, 2, 3)])])])
    return cx.add("add", [n, cx.add("mul", [z, cx.add("sub", [h, n])])])  # (1 - z) n + z h


@converts("aten.rnn_tanh_cell.default", "aten.rnn_relu_cell.default")
def _rnn_cell(cx: LiftCtx, x: Node, h: Node, w_ih: Node, w_hh: Node, b_ih: Node | None = None,
              b_hh: Node | None = None) -> Node:
    gi, gh = _affine(cx, x, h, w_ih, w_hh, b_ih, b_hh)
    act = "tanh" if "tanh" in str(cx.fx_node.target) else "relu"
    return cx.add(act, [cx.add("add", [gi, gh])])
