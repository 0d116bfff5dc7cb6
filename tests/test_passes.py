"""Every rewrite rule fires on a program built for it, and keeps the program's values."""

from __future__ import annotations

import pytest
import torch

from ir.graph import Graph
from ir.passes import P, Trace, X, run_passes
from ir.passes.cleanup import CANONICAL_RULES
from ir.passes.simplify import SIMPLIFY_RULES
from ir.types import TensorType
from ir.verify import verify_graph

from .conftest import ROOT
from .helpers import assert_matches_module, assert_same_values

# rule -> suite problem in which it must fire
RULE_PROBLEMS = {
    "reduce-through-linear": "rule_sum_through_linear",
    "reduce-through-matmul": "rule_sum_through_matmul_conv",
    "reduce-through-conv": "rule_sum_through_matmul_conv",
    "reduce-of-full-conv-transpose": "rule_mean_of_full_conv_transpose",
    "reduce-over-size1": "rule_size1_axes",
    "softmax-over-size1": "rule_size1_axes",
    "logsumexp-over-size1": "rule_size1_axes",
    "global-adaptive-pool-is-mean": "rule_global_pool_mean",
    "full-window-avg-pool-is-mean": "rule_global_pool_mean",
    "reduce-of-reduce": "rule_global_pool_mean",
    "mul-by-one": "rule_identities",
    "one-times": "rule_identities",
    "add-zero": "rule_identities",
    "zero-plus": "rule_identities",
    "div-by-one": "rule_identities",
    "pow-one": "rule_identities",
    "dropout-off": "rule_identities",
    "permute-permute": "rule_identities",
    "reshape-reshape": "rule_identities",
    "neg-neg": "rule_identities",
    "slice-through-permute": "rule_identities",
    "slice-of-concat": "rule_identities",
    "slice-of-slice": "rule_identities",
    "clamp-of-clamp": "rule_clamps",
    "clamp-of-bounded": "rule_clamps",
    "hardtanh-is-clamp": "rule_clamps",
    "scalar-chain": "rule_scalar_chains",
    "written-attention": "written_attention",
    "flip-scan-flip": "scan_reverse_cumsum",
    "one-gemm-over-steps": "rule_gemm_over_steps",
    "one-gemm-over-a-sum": "rule_gemm_over_sum",
    "same-value": "rule_cse_fold",
    "fold-constant": "rule_cse_fold",
}


def _noop_graph(op: str) -> Graph:
    g = Graph("noop")
    x = g.input("x", TensorType((4, 6), "f32"))
    attrs = {"reshape": {"shape": [4, 6]}, "expand": {"shape": [4, 6]}, "cast": {"dtype": "f32"},
             "permute": {"dims": [0, 1]}}[op]
    y = g.add(op, [x], attrs)
    g.outputs = [g.add("exp", [y])]
    return g


NOOP_RULES = {"reshape-noop": "reshape", "expand-noop": "expand", "cast-noop": "cast", "permute-noop": "permute"}
# rules for the shapes a JAX program's jaxpr takes: rule -> JAX problem (tests/jax_problems) where it fires
JAX_RULES = {"reduction-keeps-its-dims": "attention", "max-with-minus-inf": "attention"}


def test_every_rule_has_a_test():
    names = {r.name for r in CANONICAL_RULES + SIMPLIFY_RULES}
    tested = set(RULE_PROBLEMS) | set(NOOP_RULES) | set(JAX_RULES)
    assert names <= tested, sorted(names - tested)


@pytest.mark.parametrize("rule", sorted(RULE_PROBLEMS))
def test_rule_fires_and_keeps_values(rule, lifted):
    problem, g = lifted(RULE_PROBLEMS[rule])
    before = g.copy()
    trace = run_passes(g, ["simplify"])
    assert rule in trace.rules(), f"{rule} did not fire; fired: {sorted(set(trace.rules()))}"
    verify_graph(g)
    for seed in (5, 6):
        assert_same_values(before, g, problem.make_inputs(seed))
    assert_matches_module(problem, g, seeds=(7,))


@pytest.mark.parametrize("rule", sorted(JAX_RULES))
def test_jax_rule_fires_and_keeps_jaxs_values(rule):
    pytest.importorskip("jax")
    import numpy as np

    from ir import run
    from ir.jax_lift import lift_jax, load_jax_problem

    problem = load_jax_problem(ROOT / "tests" / "jax_problems" / f"{JAX_RULES[rule]}.py")
    g = lift_jax(problem)
    assert rule in run_passes(g, ["simplify"]).rules()
    verify_graph(g)
    params, inputs = problem.make(3)
    want = np.asarray(problem.model(params, *inputs))
    got = run(g, [torch.from_numpy(np.array(x)) for x in inputs])[0]
    torch.testing.assert_close(got, torch.from_numpy(want), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("rule", sorted(NOOP_RULES))
def test_noop_rules(rule):
    g = _noop_graph(NOOP_RULES[rule])
    before = g.copy()
    trace = run_passes(g, ["canonicalize"])
    assert trace.rules() == [rule]
    assert [n.op for n in g.nodes] == ["input", "exp"]
    assert_same_values(before, g, [torch.randn(4, 6)])


def test_reduce_through_linear_turns_gemm_into_gemv(lifted):
    _, g = lifted("rule_sum_through_linear")
    run_passes(g, ["simplify"])
    linears = [n for n in g.nodes if n.op == "linear"]
    assert [n.shape for n in linears] == [(8, 1), (8, 1)]  # no [8,64] or [8,16] GEMM remains


def test_a_weight_applied_to_every_step_is_one_gemm_over_all_steps(lifted):
    _, g = lifted("rule_gemm_over_steps")
    run_passes(g, ["simplify", "cse", "dce"])
    shapes = sorted(n.shape for n in g.nodes if n.op == "linear")
    # the input projection over all 4 steps at once; 4 recurrent GEMMs; the skip's two steps left alone
    assert shapes == [(3, 16)] * 6 + [(4, 3, 16)], shapes


def test_a_sum_of_step_gemms_is_one_gemm_over_the_steps(lifted):
    _, g = lifted("rule_gemm_over_sum")
    run_passes(g, ["simplify", "cse", "dce"])
    (mm,) = [n for n in g.nodes if n.op == "matmul"]
    assert mm.args[0].shape == (48, 14) and mm.args[1].shape == (14, 32)  # K: 7 products of 2


def test_scalar_chain_folds_to_one_multiply_and_add(lifted):
    _, g = lifted("rule_scalar_chains")
    run_passes(g, ["simplify"])
    ops = [n.op for n in g.nodes if n.op not in ("input", "param", "scalar")]
    # x*2*0.5/4 + 1 - 3 -> (x * 0.25) + -2; then /2/5 -> /10; 2*(3*x) -> x*6
    assert ops.count("linear") == 1 and ops.count("div") == 1 and ops.count("mul") == 2, ops


def test_clamps_collapse(lifted):
    _, g = lifted("rule_clamps")
    run_passes(g, ["simplify"])
    a, b, c, d = g.outputs
    assert a.op == "clamp" and a.attrs["min"] == -1.0 and a.attrs["max"] == 3.0
    assert b.op == "clamp" and b.attrs["min"] == 0.0 and b.args[0].op == "input"
    assert {x.op for x in c.args} == {"sigmoid", "tanh"}
    assert d.op == "clamp" and d.attrs["min"] == 0.0 and d.attrs["max"] == 2.0


def test_simplify_reaches_a_fixed_point(lifted):
    _, g = lifted("rule_identities")
    run_passes(g, ["simplify"])
    assert run_passes(g, ["simplify"]).firings == []


def test_dead_code_removes_unused_values():
    g = Graph("d")
    x = g.input("x", TensorType((3,), "f32"))
    g.add("exp", [x])
    g.outputs = [g.add("neg", [x])]
    trace = run_passes(g, ["dce"])
    assert trace.rules() == ["dead-value"] and [n.op for n in g.nodes] == ["input", "neg"]


def test_pattern_binding_must_be_consistent():
    g = Graph("p")
    x = g.input("x", TensorType((3,), "f32"))
    y = g.input("y", TensorType((3,), "f32"))
    same, diff = g.add("mul", [x, x]), g.add("mul", [x, y])
    pat = P("mul", X("a"), X("a"))
    assert pat.match(same, {}) and not pat.match(diff, {})


def test_decompose_records_each_composite(lifted):
    _, g = lifted("norm_layer_rms")
    trace = Trace()
    run_passes(g, ["decompose"], trace)
    assert {"decompose-layer_norm", "decompose-rms_norm"} <= set(trace.rules())


def test_trace_names_the_pass_and_rule(lifted):
    _, g = lifted("rule_sum_through_linear")
    trace = run_passes(g, ["simplify"])
    line = next(str(f) for f in trace.firings if f.rule == "reduce-through-linear")
    assert line.startswith("[algebraic] reduce-through-linear: %")


def test_every_stage_is_a_registered_frozen_pass_named_by_its_class():
    import dataclasses

    from ir.passes import parse_pipeline, pass_class, pass_names

    assert {"canonicalize", "fold", "cse", "dce", "algebraic", "simplify", "decompose", "fuse", "rows"} <= \
        set(pass_names())
    for name in pass_names():
        cls = pass_class(name)
        assert cls.name == name and dataclasses.is_dataclass(cls)
        p = cls()
        with pytest.raises(dataclasses.FrozenInstanceError):
            p.name_of_nothing = 1  # options are fields of a frozen value
    [d] = parse_pipeline("decompose{only=softmax:layer_norm}")
    assert d.only == ("softmax", "layer_norm")


def test_pipeline_string_errors_are_one_line():
    from ir.errors import AkgError
    from ir.passes import parse_pipeline

    with pytest.raises(AkgError, match="unknown pass 'nope'"):
        parse_pipeline("simplify,nope")
    with pytest.raises(AkgError, match="has no option 'x'"):
        parse_pipeline("decompose{x=1}")


def test_plan_passes_set_the_plan_and_a_rewrite_drops_it(lifted):
    _, g = lifted("l2_gemm_gelu_softmax_layernorm")
    run_passes(g, "simplify,decompose,simplify,fuse,rows")
    assert g.plan is not None and any(grp.rows for grp in g.plan.groups)
    run_passes(g, "decompose")  # nothing left to decompose: the graph and its plan stay
    assert g.plan is not None
    g.replace_uses(g.outputs[0], g.outputs[0])
    assert g.plan is None
