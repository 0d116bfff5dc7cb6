"""Types, op registry, text form edge cases, the structural verifier and the interpreter."""

from __future__ import annotations

import math

import pytest
import torch

from ir import run
from ir.decompose import decomposition_for
from ir.graph import Graph, print_graph
from ir.interp import IMPLS, EvalCtx
from ir.lift import lift
from ir.ops import OPS
from ir.problem import load_problem
from ir.text import IRParseError, parse_graph
from ir.types import TensorType
from ir.verify import IRVerifyError, verify_graph


def small_graph() -> Graph:
    g = Graph("g")
    x = g.input("x", TensorType((2, 3), "f32"))
    w = g.param("lin.weight", torch.randn(4, 3))
    y = g.add("linear", [x, w])
    z = g.add("layer_norm", [y, None, None], {"normalized_shape": [4], "eps": 1e-6})
    g.outputs = [z]
    return g


def test_every_op_has_a_meaning():
    for name, d in OPS.items():
        if d.group == "composite":
            assert callable(decomposition_for(name)), name
        elif name not in ("input", "param"):
            assert name in IMPLS, name


def test_tensor_type_text():
    assert str(TensorType((2, 3), "bf16")) == "bf16[2,3]"
    assert str(TensorType((), "f32")) == "f32[]"
    assert str(TensorType((1, 2, 3, 4), "f16", "channels_last")) == "f16[1,2,3,4]@channels_last"
    with pytest.raises(ValueError):
        TensorType((2,), "f8")


@pytest.mark.parametrize("value", [1, -7, 1.0, -0.25, 1e-30, 3.0e20, math.inf, -math.inf, True, False, None,
                                   "a \"quoted\" $tring", (1, 2.5, None), ()])
def test_attribute_values_round_trip(value):
    g = Graph("attrs")
    x = g.input("x", TensorType((4,), "f32"))
    # opaque carries arbitrary attribute values; it is never evaluated here
    g.outputs = [g.add("opaque", [x], {"target": "aten.exp.default", "args": ("$0", value)},
                       TensorType((4,), "f32"))]
    text = print_graph(g)
    back = parse_graph(text).outputs[0].attrs["args"][1]
    assert back == value and type(back) is type(value)


def test_nan_attribute_round_trips():
    g = Graph("nan")
    g.outputs = [g.add("scalar", [], {"value": math.nan})]
    assert math.isnan(parse_graph(print_graph(g)).outputs[0].attrs["value"])


def test_layout_and_none_operands_round_trip():
    g = Graph("layout")
    x = g.input("x", TensorType((1, 2, 3, 4), "f32", "channels_last"))
    g.outputs = [g.add("batch_norm", [x, None, None, None, None], {"training": True})]
    text = print_graph(g)
    assert "@channels_last" in text and "none, none" in text
    assert print_graph(parse_graph(text)) == text


def test_parse_errors_are_one_line():
    with pytest.raises(IRParseError, match="does not parse"):
        parse_graph("graph g { %x: f32[2] = input( }")
    with pytest.raises(IRParseError, match="undefined value %y"):
        parse_graph("graph g {\n %x: f32[2] = exp(%y)\n return %x\n}")
    with pytest.raises(IRParseError, match="defined twice"):
        parse_graph("graph g {\n %x: f32[2] = input()\n %x: f32[2] = exp(%x)\n return %x\n}")


def test_weights_travel_beside_the_text():
    g = small_graph()
    back = parse_graph(print_graph(g), g.weights)
    x = torch.randn(2, 3)
    torch.testing.assert_close(run(back, [x])[0], run(g, [x])[0])


def test_verifier_catches_wrong_types_and_order():
    g = small_graph()
    verify_graph(g)
    bad = g.copy()
    bad.nodes[2].type = TensorType((2, 5), "f32")  # the linear's type
    with pytest.raises(IRVerifyError, match="operands give f32\\[2,4\\]"):
        verify_graph(bad)
    bad = g.copy()
    bad.nodes[2], bad.nodes[3] = bad.nodes[3], bad.nodes[2]
    with pytest.raises(IRVerifyError, match="before it is defined"):
        verify_graph(bad)
    bad = g.copy()
    bad.weights["lin.weight"] = torch.randn(4, 4)
    with pytest.raises(IRVerifyError, match="weight is f32\\[4,4\\]"):
        verify_graph(bad)
    bad = g.copy()
    bad.nodes[3].attrs["bogus"] = 1
    with pytest.raises(IRVerifyError, match="unknown attribute"):
        verify_graph(bad)


def test_graph_rejects_bad_attributes():
    g = Graph("g")
    x = g.input("x", TensorType((2,), "f32"))
    with pytest.raises(ValueError, match="needs attribute"):
        g.add("softmax", [x])
    with pytest.raises(ValueError, match="no attribute"):
        g.add("exp", [x], {"dim": 0})


def test_dropout_in_training_is_seeded_and_scaled():
    g = Graph("d")
    x = g.input("x", TensorType((1000,), "f32"))
    g.outputs = [g.add("dropout", [x], {"p": 0.25, "training": True})]
    ones = torch.ones(1000)
    a = run(g, [ones], ctx=EvalCtx(generator=torch.Generator().manual_seed(1)))[0]
    b = run(g, [ones], ctx=EvalCtx(generator=torch.Generator().manual_seed(1)))[0]
    assert torch.equal(a, b)
    assert set(a.unique().tolist()) == {0.0, torch.tensor(1 / 0.75).item()}
    assert 0.15 < (a == 0).float().mean().item() < 0.35


def test_composite_eager_equals_its_graph_decomposition():
    from ir.passes import run_passes

    g = small_graph()
    x = torch.randn(2, 3)
    before = run(g, [x])[0]
    run_passes(g, ["decompose"])
    assert "layer_norm" not in g.ops()
    torch.testing.assert_close(run(g, [x])[0], before, rtol=0, atol=0)


def test_interpreter_frees_intermediates_but_keeps_outputs():
    g = Graph("chain")
    x = g.input("x", TensorType((8,), "f32"))
    a = g.add("exp", [x])
    b = g.add("neg", [a])
    g.outputs = [a, g.add("abs", [b])]
    out = run(g, [torch.zeros(8)])
    torch.testing.assert_close(out[0], torch.ones(8))
    torch.testing.assert_close(out[1], torch.ones(8))


def test_bitwise_not_lifts_for_masks_and_integers(tmp_path):
    """Mamba-2's segment sum masks with `~mask` on a bool tensor."""
    path = tmp_path / "bitnot.py"
    path.write_text(
        "import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n"
        "    def forward(self, x, k):\n"
        "        mask = torch.tril(torch.ones(4, 4, dtype=torch.bool))\n"
        "        return x.masked_fill(~mask, -1.0), ~k\n\n\n"
        "def get_inputs():\n    return [torch.randn(4, 4), torch.randint(-5, 5, (4,))]\n\n\n"
        "def get_init_inputs():\n    return []\n")
    p = load_problem(path)
    inputs = p.make_inputs(0)
    for got, want in zip(run(lift(p), inputs), p.build_model(0)(*inputs)):
        torch.testing.assert_close(got, want)


def test_var_mean_and_std_mean_lift_as_a_pair(tmp_path):
    path = tmp_path / "varmean.py"
    path.write_text(
        "import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n"
        "    def forward(self, x):\n"
        "        v, m = torch.var_mean(x, dim=-1)\n"
        "        s, m2 = torch.std_mean(x, dim=(0,), unbiased=False, keepdim=True)\n"
        "        return v, m, s, m2\n\n\n"
        "def get_inputs():\n    return [torch.randn(6, 10) * 3 + 1]\n\n\n"
        "def get_init_inputs():\n    return []\n")
    p = load_problem(path)
    inputs = p.make_inputs(0)
    got, want = run(lift(p), inputs), p.build_model(0)(*inputs)
    assert len(got) == 4
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b)
