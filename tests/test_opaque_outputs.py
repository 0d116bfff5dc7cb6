"""An op akg leaves to torch that returns several tensors (a mixture-of-experts router's topk: weights and
expert indices) is kept as one torch call per output read (`opaque` with `item`), so the graph around it is
still written; Mixtral's router graph ran wholly as torch ("returns several values")."""

from __future__ import annotations

import pytest
import torch
import torch.fx

import akg_agent.translate as tr
from ir.convert import LiftCtx
from ir.errors import AkgError
from ir.graph import Graph
from ir.lift import _opaque, lift
from ir.problem import load_problem

ROUTER = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.gate = nn.Linear(32, 8)

    def forward(self, x):
        p = F.softmax(self.gate(x), dim=-1)
        w, idx = torch.topk(p, 2, dim=-1)
        return w / w.sum(-1, keepdim=True), idx, torch.greater(
            F.one_hot(idx, num_classes=8).permute(2, 1, 0).sum((-1, -2)), 0)


def get_inputs():
    return [torch.randn(64, 32)]


def get_init_inputs():
    return []
'''


def _problem(tmp_path):
    path = tmp_path / "router.py"
    path.write_text(ROUTER)
    return path


def test_a_router_topk_is_one_torch_call_per_output_and_the_rest_is_written(tmp_path):
    g = lift(load_problem(_problem(tmp_path)), allow_opaque=True)
    items = sorted(n.attrs["item"] for n in g.nodes if n.op == "opaque" and "topk" in n.attrs["target"])
    assert items == [0, 1]
    # one_hot runs another path on real tensors than on torch.export's fake ones (aminmax, scatter_): the
    # declared ops are both paths', or the verifier refused the router's module as undeclared torch compute
    (hot,) = [n for n in g.nodes if n.op == "opaque" and "one_hot" in n.attrs["target"]]
    assert {"aten.aminmax", "aten.scatter_"} <= set(hot.attrs["dispatch"])
    assert not [n for n in g.nodes if n.op == "opaque" and "greater" in n.attrs["target"]]  # gt's alias
    t = tr.translate(_problem(tmp_path), "cpp", "cpu", timing=False, seeds=(0, 1), allow_opaque=True)
    assert t.verdict.accepted, t.verdict.reason
    assert "torch.ops.aten.topk.default(" in t.source and ")[1]" in t.source
    assert t.program.kernels()  # the softmax and the renormalisation generated around it


def test_a_multi_output_op_that_draws_random_numbers_is_refused():
    """Two calls of a random op would disagree (dropout's fused form: its output and its mask)."""
    fx = torch.fx.Graph()
    n = fx.call_function(torch.ops.aten.native_dropout.default, ())
    n.meta["val"] = (torch.empty(4), torch.empty(4, dtype=torch.bool))
    with pytest.raises(AkgError, match="draws random numbers"):
        _opaque(LiftCtx(Graph("g"), allow_opaque=True), n, "aten.native_dropout.default", [], {}, "x.py")
    n.meta["val"] = (torch.empty(4), 3)  # not every result a tensor
    with pytest.raises(AkgError, match="returns tuple"):
        _opaque(LiftCtx(Graph("g"), allow_opaque=True), n, "aten.max.dim", [], {}, "x.py")
