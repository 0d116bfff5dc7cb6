"""Every suite problem lifts, verifies, round-trips through text, and matches its module through the
interpreter; simplification and decomposition keep its values."""

from __future__ import annotations

import pytest

from ir.graph import print_graph
from ir.ops import OPS
from ir.passes import run_passes
from ir.text import parse_graph
from ir.verify import verify_graph

from .conftest import PROBLEMS
from .helpers import assert_matches_module

NAMES = [p.stem for p in PROBLEMS]


def test_suite_is_large_and_covers_every_group():
    assert len(NAMES) >= 60


@pytest.mark.parametrize("name", NAMES)
def test_lift_verify_roundtrip_and_match(name, lifted):
    problem, g = lifted(name)
    verify_graph(g)
    text = print_graph(g)
    again = parse_graph(text, g.weights)
    assert print_graph(again) == text
    verify_graph(again)
    assert_matches_module(problem, g)
    assert_matches_module(problem, again, seeds=(3,))


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("passes", [["simplify"], ["decompose"], ["decompose", "simplify"]])
def test_passes_keep_values(name, passes, lifted):
    problem, g = lifted(name)
    run_passes(g, passes, verify=True)
    if "decompose" in passes:
        assert not [n.op for n in g.nodes if OPS[n.op].group == "composite"]
    assert_matches_module(problem, g, seeds=(4,))
    assert print_graph(parse_graph(print_graph(g))) == print_graph(g)


def test_suite_covers_every_op_group(lifted):
    groups = set()
    ops = set()
    for name in NAMES:
        _, g = lifted(name)
        ops |= {n.op for n in g.nodes}
        groups |= {OPS[n.op].group for n in g.nodes}
    assert groups >= {"source", "unary", "binary", "ternary", "reduction", "contraction", "window", "scan",
                      "movement", "random", "composite"}
    wanted = {"matmul", "linear", "conv", "conv_transpose", "max_pool", "avg_pool", "adaptive_avg_pool",
              "adaptive_max_pool", "cumsum", "cumprod", "reshape", "permute", "slice", "expand", "concat", "pad",
              "gather", "index_select", "dropout", "softmax", "log_softmax", "logsumexp", "batch_norm",
              "instance_norm", "group_norm", "layer_norm", "rms_norm", "attention", "mse_loss", "cross_entropy",
              "huber_loss", "kl_div", "triplet_margin_loss", "hinge_embedding_loss", "argmax", "argmin", "prod",
              "norm", "var", "std", "where"}
    assert wanted <= ops, f"suite never uses {sorted(wanted - ops)}"
