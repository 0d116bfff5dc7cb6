"""Attention a program writes out (`ir.passes.attention`): softmax(Q @ K^T [* c | / c] [+ B], -1) @ V becomes
one `attention` composite whose meaning is the program's (a query whose every score is -inf stays NaN, where
torch's own attention answers 0); chains that are not attention's, or whose parts are read elsewhere, stay."""

from __future__ import annotations

import math

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from akg_agent.translate import build, render
from ir import run
from ir.graph import Graph
from ir.passes import run_passes
from ir.types import TensorType

from .helpers import import_written, problem_namespace

B, H, L, D = 2, 3, 5, 8


def _written(scale: str = "none", bias: bool = True, returned: bool = False) -> Graph:
    g = Graph("g")
    q, k, v = (g.input(n, TensorType((B, H, L, D), "f32")) for n in "qkv")
    s = g.add("matmul", [q, g.add("permute", [k], {"dims": [0, 1, 3, 2]})])
    if scale == "mul":
        s = g.add("mul", [s, g.add("scalar", [], {"value": 0.125, "dtype": "f32"})])
    elif scale == "div":
        s = g.add("div", [s, g.add("scalar", [], {"value": math.sqrt(D), "dtype": "f32"})])
    if bias:
        s = g.add("add", [s, g.input("bias", TensorType((1, H, L, L), "f32"))])
    p = g.add("dropout", [g.add("softmax", [s], {"dim": -1})], {"p": 0.0})
    g.outputs = [g.add("matmul", [p, v])] + ([s] if returned else [])
    return g


def _inputs(bias: bool = True) -> list[torch.Tensor]:
    torch.manual_seed(0)
    xs = [torch.randn(B, H, L, D) for _ in range(3)]
    if bias:
        b = torch.randn(1, H, L, L)
        b[0, 1, 2, :] = -math.inf  # every key masked for one query: the written softmax's NaN
        xs.append(b)
    return xs


def test_a_written_attention_becomes_one_composite_with_the_programs_meaning():
    for scale, want_scale in (("none", 1.0), ("mul", 0.125), ("div", 1 / math.sqrt(D))):
        g = _written(scale)
        xs = _inputs()
        before = run(g, xs)[0]
        run_passes(g, "simplify")
        [att] = [n for n in g.nodes if n.op == "attention"]
        assert att.attrs["nan_rows"] and math.isclose(att.attrs["scale"], want_scale) and len(att.args) == 4
        assert not any(n.op in ("softmax", "matmul") for n in g.nodes)
        after = run(g, xs)[0]
        assert torch.isnan(after[:, 1, 2]).all() and torch.isnan(before[:, 1, 2]).all()
        torch.testing.assert_close(after, before, equal_nan=True)


def test_chains_that_are_not_attentions_stay_written():
    g = _written(returned=True)  # the scores are an output too: a composite would hide them
    run_passes(g, "simplify")
    assert not any(n.op == "attention" for n in g.nodes)
    g = _written(bias=False)
    sm = next(n for n in g.nodes if n.op == "softmax")
    sm.attrs["dim"] = 2  # a softmax over the queries
    run_passes(g, "simplify")
    assert not any(n.op == "attention" for n in g.nodes)


T5_LIKE = '''
import math
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.q, self.k, self.v = nn.Linear(32, 32), nn.Linear(32, 32), nn.Linear(32, 32)

    def forward(self, x, bias):
        b, l, _ = x.shape
        q, k, v = (f(x).view(b, l, 4, 8).transpose(1, 2) for f in (self.q, self.k, self.v))
        s = torch.matmul(q, k.transpose(3, 2)) + bias
        return torch.matmul(torch.softmax(s, dim=-1), v).transpose(1, 2).reshape(b, l, 32)


def get_inputs():
    bias = torch.randn(1, 4, 16, 16)
    bias[0, 2, 3, :] = -math.inf
    return [torch.randn(2, 16, 32), bias]


def get_init_inputs():
    return []
'''


def test_a_written_attention_left_to_the_library_keeps_its_nan_rows(tmp_path, monkeypatch):
    """Left to torch's attention (which answers 0 for a query with every key masked), the module puts the
    written softmax's NaN back for those queries; the rest is torch's attention's."""
    monkeypatch.setenv("AKG_CACHE_DIR", str(tmp_path / "cache"))
    path = tmp_path / "t5.py"
    path.write_text(T5_LIKE)
    t = build(path, "cpp", "cpu", tuned=False, library=("gemm", "attention"))
    src = render(t)
    assert "F.scaled_dot_product_attention(" in src and "held=False)" in src
    mod, ns = import_written(tmp_path, src, "t5_m"), problem_namespace(T5_LIKE)
    torch.manual_seed(0)
    ref = ns["Model"]()
    new = mod.ModelNew()
    new.load_state_dict(ref.state_dict(), strict=False)
    xs = ns["get_inputs"]()
    got, want = new(*xs), ref(*xs)
    assert torch.isnan(want[:, 3, 16:24]).all()
    assert torch.equal(torch.isnan(got), torch.isnan(want))
    torch.testing.assert_close(got, want, equal_nan=True, rtol=1e-5, atol=1e-5)


class Ops(TorchDispatchMode):
    """The ATen ops a call runs."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.seen.append(str(func))
        return func(*args, **(kwargs or {}))


TWO_LAYERS = T5_LIKE.replace("    def forward(self, x, bias):", """    def forward(self, x, bias):
        return self.attend(self.attend(x, bias), bias)

    def attend(self, x, bias):""")


def test_layers_reading_one_mask_look_at_it_once_a_call(tmp_path, monkeypatch):
    """T5's position bias, computed each call and read by every layer: whether a query has every key masked
    is found once a call for all of them, and without such a query no kernel puts NaN back."""
    monkeypatch.setenv("AKG_CACHE_DIR", str(tmp_path / "cache"))
    path = tmp_path / "two.py"
    path.write_text(TWO_LAYERS)
    src = render(build(path, "cpp", "cpu", tuned=False, library=("gemm", "attention")))
    assert src.count("held=False)") == 2
    mod, ns = import_written(tmp_path, src, "two_m"), problem_namespace(TWO_LAYERS)
    torch.manual_seed(0)
    ref = ns["Model"]()
    new = mod.ModelNew()
    new.load_state_dict(ref.state_dict(), strict=False)
    x, bias = ns["get_inputs"]()
    for b in (bias, bias.clamp(min=-1e9)):  # a fully masked query; none
        with Ops() as ops:
            got = new(x, b.clone())  # a new mask each call, as T5 computes it
        want = ref(x, b)
        torch.testing.assert_close(got, want, equal_nan=True, rtol=1e-5, atol=1e-5)
        assert sum("amax" in op for op in ops.seen) == 1
        assert any("where" in op for op in ops.seen) == bool(torch.isneginf(b).all(-1).any())


HELD_MASK = T5_LIKE.replace(
    "self.q, self.k, self.v = nn.Linear(32, 32), nn.Linear(32, 32), nn.Linear(32, 32)",
    "self.q, self.k, self.v = nn.Linear(32, 32), nn.Linear(32, 32), nn.Linear(32, 32)\n"
    "        self.register_buffer('bias', torch.zeros(2, 1, 1, 16))  # a padding mask the module holds").replace(
    "def forward(self, x, bias):", "def forward(self, x):").replace("+ bias", "+ self.bias").replace(
    "return [torch.randn(2, 16, 32), bias]", "return [torch.randn(2, 16, 32)]")


def test_a_mask_the_module_holds_is_looked_at_once_per_version(tmp_path, monkeypatch):
    """BERT's padding mask, a constant dynamo keeps in the graph: whether a query has every key masked is
    found once; without such a query no kernel puts NaN back (two per layer on the H200: 13 us), and a mask
    changed in place (load_state_dict) is looked at again, so its fully masked query answers NaN."""
    monkeypatch.setenv("AKG_CACHE_DIR", str(tmp_path / "cache"))
    path = tmp_path / "held.py"
    path.write_text(HELD_MASK)
    t = build(path, "cpp", "cpu", tuned=False, library=("gemm", "attention"))
    src = render(t)
    assert "held=True)" in src
    mod, ns = import_written(tmp_path, src, "held_m"), problem_namespace(HELD_MASK)
    torch.manual_seed(0)
    ref = ns["Model"]()
    new = mod.ModelNew()
    new.load_state_dict(ref.state_dict(), strict=False)
    x = ns["get_inputs"]()[0]
    torch.testing.assert_close(new(x), ref(x), rtol=1e-5, atol=1e-5)  # the first call looks at the mask
    with Ops() as ops:
        got = new(x)
    assert not any("isneginf" in op or "where" in op for op in ops.seen)
    torch.testing.assert_close(got, ref(x), rtol=1e-5, atol=1e-5)
    ref.bias[1, 0, 0, :] = -math.inf  # every key masked for the second sequence
    new.load_state_dict(ref.state_dict(), strict=False)
    got, want = new(x), ref(x)
    assert torch.isnan(want[1]).all() and torch.equal(torch.isnan(got), torch.isnan(want))
    torch.testing.assert_close(got, want, equal_nan=True, rtol=1e-5, atol=1e-5)
