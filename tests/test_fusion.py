"""Fusion groups: golden groupings, boundary reasons, determinism, and structural invariants."""

from __future__ import annotations

import networkx as nx
import pytest

from ir.kernel.analysis import gemm_dims
from ir.kernel.lower import lower
from ir.passes import run_passes
from ir.passes.fusion import SOURCES, fuse, to_dot
from ir.text import parse_graph

from .conftest import PROBLEMS


def _groups(plan):
    return [(grp.kind, [n.op for n in grp.nodes]) for grp in plan.groups]


def test_contraction_takes_its_pointwise_epilogue(lifted):
    _, g = lifted("l2_conv_relu_biasadd")
    plan = fuse(g)
    assert _groups(plan) == [("contraction", ["conv", "relu", "add"])]
    assert plan.boundaries == []


def test_second_anchor_starts_a_new_group(lifted):
    _, g = lifted("l2_gemm_scale_sigmoid_sum")
    plan = fuse(g)
    assert _groups(plan) == [("contraction", ["linear", "div", "sigmoid"]), ("reduction", ["sum", "mul"])]
    (b,) = plan.boundaries
    assert (b.producer, b.consumer) == (0, 1) and b.reason.startswith("one anchor per kernel")


def test_reduction_takes_a_pointwise_prologue(lifted):
    _, g = lifted("loss_mse_huber_l1")
    plan = fuse(g)
    kinds = _groups(plan)
    assert ("reduction", ["sub", "abs", "sum"]) in kinds  # l1_loss(sum): |p - t| fused into the sum


def test_shared_value_is_a_boundary_with_its_reason(lifted):
    _, g = lifted("ew_activations_a")
    plan = fuse(g)
    assert len(plan.groups) == 1  # pure pointwise: one kernel although x feeds many ops
    _, g = lifted("l2_convT_bn_tanh_pool_gn")
    reasons = {b.reason for b in fuse(g).boundaries}
    assert any(r.startswith("one anchor per kernel") for r in reasons)


def test_contraction_operands_are_not_prologues(lifted):
    _, g = lifted("mm_rect_transposed")
    plan = fuse(g)
    assert any(b.reason == "contraction operands are not fused as prologues" for b in plan.boundaries)


@pytest.mark.parametrize("name", [p.stem for p in PROBLEMS])
def test_fusion_invariants(name, lifted):
    _, g = lifted(name)
    run_passes(g, ["simplify"])
    plan = fuse(g)
    compute = [n for n in g.nodes if n.op not in SOURCES]
    owners = [sum(n in grp.nodes for grp in plan.groups) for n in compute]
    assert owners == [1] * len(compute), "every compute node in exactly one group"
    for grp in plan.groups:
        anchors = [n for n in grp.nodes if n.op not in SOURCES and grp.anchor is n]
        assert len(anchors) <= 1
    dag = nx.DiGraph()
    dag.add_nodes_from(grp.id for grp in plan.groups)
    gid = {id(n): grp.id for grp in plan.groups for n in grp.nodes}
    for n in compute:
        for a in n.args:
            if a is not None and id(a) in gid and gid[id(a)] != gid[id(n)]:
                dag.add_edge(gid[id(a)], gid[id(n)])
                assert gid[id(a)] < gid[id(n)], "groups are numbered in execution order"
    assert nx.is_directed_acyclic_graph(dag)
    assert {(b.producer, b.consumer) for b in plan.boundaries} == set(dag.edges)
    assert str(fuse(g)) == str(plan), "deterministic"


def test_dot_output_has_clusters(lifted):
    _, g = lifted("l2_gemm_scale_sigmoid_sum")
    dot = to_dot(g, fuse(g))
    assert dot.startswith('digraph "Model"') and "cluster_0" in dot and "cluster_1" in dot


def test_weight_only_groups_are_marked(lifted):
    _, g = lifted("rule_sum_through_linear")
    run_passes(g, ["simplify"])
    plan = fuse(g)
    marked = [grp for grp in plan.groups if grp.weights_only]
    assert marked and all(grp.kind == "reduction" for grp in marked)  # sum(W, 0), sum(b): once per load
    assert all(not grp.weights_only for grp in plan.groups if grp.kind == "contraction")


def test_a_reshape_merging_heads_back_stays_out_of_the_contraction():
    """Attention's P @ V, heads moved back and merged: fusing the merge would index the output by one
    flat coordinate that A and B both read (a GEMM of M = N = 1 per output element)."""
    g = parse_graph("""graph G {
      %p: f32[2,4,8,8] = input()
      %v: f32[2,4,8,16] = input()
      %o: f32[2,4,8,16] = matmul(%p, %v)
      %t: f32[2,8,4,16] = permute(%o) {dims=[0,2,1,3]}
      %r: f32[2,8,64] = reshape(%t) {shape=[2,8,64]}
      return %r
    }""")
    plan = fuse(g)
    assert _groups(plan)[0] == ("contraction", ["matmul", "permute"])
    assert any(b.reason.startswith("a reshape merging dimensions") for b in plan.boundaries)
    (gemm,) = [k for k in lower(g, plan).kernels() if k.reductions()]
    assert gemm_dims(gemm)[:2] == (8, 16)
