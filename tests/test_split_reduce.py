"""Reductions over few long rows split over chunks (ir.passes.split): each op keeps its value (the IR
interpreter, in float64), the decision follows the target's parallel units, row fusion leaves the
split kernels alone, and translated modules verify (C++ natively, Triton and Pallas through their
CPU executors, CUDA-C compiled)."""

from __future__ import annotations

import shutil

import pytest
import torch

from akg_agent.translate import build, pipeline_for, translate
from dsl_backends import get_backend
from hardware_models.spec import load_target
from ir import run
from ir.graph import Graph
from ir.passes import run_passes
from ir.passes.split import chunks
from ir.types import TensorType

from .helpers import assert_verified_or_compiled

ROWS, LENGTH = 3, 1 << 15


def _graph(op: str, shape: list[int], dims: list[int] | None, dtype: str = "f64", **attrs: object) -> Graph:
    g = Graph("g")
    x = g.input("x", TensorType(tuple(shape), dtype))
    g.outputs = [g.add(op, [x], dict(dims=dims, keepdim=True, **attrs))]
    return g


def _splits(g: Graph) -> int:
    return sum(bool(n.meta.get("split")) for n in g.nodes)


CASES = [("sum", {}), ("mean", {}), ("amax", {}), ("amin", {}), ("prod", {}), ("norm", {"ord": 2.0}),
         ("norm", {"ord": 1.0}), ("norm", {"ord": float("inf")}), ("var", {"correction": 1.0}),
         ("var", {"correction": 0.0}), ("std", {"correction": 1.0})]


@pytest.mark.parametrize("op,attrs", CASES, ids=[f"{o}-{'-'.join(map(str, a.values()))}" for o, a in CASES])
@pytest.mark.parametrize("dims", [[1, 2], None], ids=["rows", "whole"])
def test_each_reduction_keeps_its_value_when_split(op, attrs, dims):
    shape = [ROWS, 64, LENGTH // 64]
    g = _graph(op, shape, dims, **attrs)
    x = torch.randn(*shape, dtype=torch.float64) * 2 + 0.5
    if op == "prod":  # a product of 32k values: kept near 1 so it stays finite
        x = 1 + x * 1e-4
    want = run(g, [x])[0]
    run_passes(g, "splitreduce{units=132 min_length=4096}")
    assert _splits(g) >= 2, "the reduction was not split"
    got = run(g, [x])[0]
    assert got.shape == want.shape
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)


def test_chunks_give_every_unit_work_without_short_chunks():
    assert chunks(16, 1 << 22, 132, 1 << 16) == 64  # 1024 partial rows, 64k elements each
    assert chunks(1, 1 << 22, 132, 1 << 16) == 1024  # a whole-tensor sum: 1024 chunks of 4096
    assert chunks(3, 4096 * 15, 132, 4096) == 8  # the largest power of two leaving chunks of 4096 or more
    assert chunks(3, 4096 * 15 + 1, 132, 4096) == 1  # an odd row: no equal chunks
    assert chunks(200, 1 << 22, 132, 1 << 16) == 1  # as many rows as units: not split
    assert chunks(16, 1 << 15, 132, 1 << 16) == 1  # short rows: not split
    assert chunks(16, 1 << 22, 0, 1 << 16) == 1  # no units named: off
    assert chunks(1, 1 << 20, 2, 1 << 16) == 8  # a 2-core CPU: four partial rows a core
    # ... whose chunks a core's cache keeps, where the row allows (a variance re-reads its chunk)
    assert chunks(1, 1 << 20, 2, 1 << 16, 1 << 17) == 8 and chunks(1, 1 << 22, 2, 1 << 16, 1 << 17) == 32
    assert chunks(1, 9 * (1 << 20), 2, 1 << 16, 1 << 17) == 128  # 9 x 2^20: 73728-long chunks (2^17 would not divide)
    assert chunks(1, 1 << 20, 2, 1 << 16, 1 << 10) == 256  # never below MIN_CHUNK


LEADING = [("sum", [0]), ("mean", [0, 1]), ("amax", [0]), ("amin", [0, 1])]


@pytest.mark.parametrize("op,dims", LEADING, ids=[f"{o}-{len(d)}" for o, d in LEADING])
def test_a_reduction_into_few_columns_keeps_its_value_when_split(op, dims):
    """A bias's gradient: [tokens, columns] summed over the tokens into 12 programs' worth of columns."""
    shape = [16, 256, 768] if len(dims) == 2 else [4096, 768]
    g = _graph(op, shape, dims)
    x = torch.randn(*shape, dtype=torch.float64)
    want = run(g, [x])[0]
    run_passes(g, "splitreduce{units=132}")
    assert _splits(g) == 2, "the reduction was not split"
    part = next(n for n in g.nodes if n.meta.get("split"))
    assert part.type.shape[0] == 64  # 12 column blocks x 64 chunks: four waves of 132
    torch.testing.assert_close(run(g, [x])[0], want, rtol=1e-12, atol=1e-12)


def test_a_16_bit_column_sum_takes_fp32_partials_and_rounds_once():
    g = _graph("sum", [4096, 768], [0], dtype="bf16")
    x = torch.randn(4096, 768).to(torch.bfloat16)
    want = run(g, [x])[0]
    run_passes(g, "splitreduce{units=132}")
    parts = [n for n in g.nodes if n.meta.get("split")]
    assert [n.type.dtype for n in parts] == ["f32", "f32"]
    assert [n.type.dtype for n in g.nodes if n.op == "cast"] == ["f32", "bf16"]
    got = run(g, [x])[0]
    assert got.dtype == torch.bfloat16
    torch.testing.assert_close(got.float(), want.float(), rtol=8e-3, atol=1e-2)


@pytest.mark.parametrize("op,attrs", [("sum", {}), ("mean", {}), ("var", {"correction": 1.0}), ("amax", {}),
                                      ("norm", {"ord": 2.0})], ids=["sum", "mean", "var", "amax", "norm"])
def test_a_16_bit_row_reduction_takes_fp32_partials_and_rounds_once(op, attrs):
    """mse_loss in bf16 over [16384, 32768]: one row, unsplit one program read 1 GB (0.01x eager)."""
    g = _graph(op, [2, LENGTH], [1], dtype="bf16", **attrs)
    x = (torch.randn(2, LENGTH) + 0.25).to(torch.bfloat16)
    want = run(g, [x])[0]
    run_passes(g, "splitreduce{units=132 min_length=4096}")
    assert _splits(g) >= 2, "the reduction was not split"
    assert {n.type.dtype for n in g.nodes if n.meta.get("split")} == {"f32"}
    # each partial casts its own load (a shared cast would be the whole input stored in fp32, read back twice)
    *up, down = [n for n in g.nodes if n.op == "cast"]
    users = g.users()
    assert [n.type.dtype for n in up] == ["f32"] * (2 if op == "var" else 1) and down.type.dtype == "bf16"
    assert all(len(users[n]) == 1 and users[n][0].meta.get("split") for n in up)
    got = run(g, [x])[0]
    assert got.dtype == torch.bfloat16 and got.shape == want.shape
    torch.testing.assert_close(got.float(), want.float(), rtol=8e-3, atol=0)  # within one bf16 rounding


@pytest.mark.parametrize("why,g", [
    ("many columns", _graph("sum", [LENGTH, 16384], [0])),
    ("short columns", _graph("sum", [16, 2], [0])),
    ("a middle axis", _graph("sum", [64, LENGTH, 2], [1])),
    ("count of nonzeros", _graph("norm", [2, LENGTH], [1], ord=0.0)),
    ("many rows", _graph("sum", [256, LENGTH], [1])),
])
def test_what_is_not_split(why, g):
    run_passes(g, "splitreduce{units=132 min_length=4096}")
    assert _splits(g) == 0, why


def test_the_pipeline_splits_only_where_the_target_names_units():
    backend = get_backend("triton")
    h200, cpu = load_target("h200"), load_target("cpu")
    assert "splitreduce{units=132}" in str(pipeline_for(backend, h200))  # no core cache figure: any chunk
    assert "splitreduce" not in str(pipeline_for(backend))
    assert cpu.core_cache_bytes > 0 and f"splitreduce{{units={cpu.units} chunk_bytes={cpu.core_cache_bytes // 2}}}" \
        in str(pipeline_for(get_backend("cpp"), cpu))


LN = """import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln = nn.LayerNorm([{c}, {n}])

    def forward(self, x):
        return self.ln(x), x.sum(), torch.linalg.vector_norm(x, dim=(1, 2))


def get_inputs():
    return [torch.randn(2, {c}, {n}) * 3 + 1]


def get_init_inputs():
    return []
"""


def _ln(tmp_path, c: int = 32, n: int = 4096):
    p = tmp_path / "ln_few_rows.py"
    p.write_text(LN.format(c=c, n=n))
    return p


def test_a_few_row_layer_norm_reads_its_input_in_one_partial_kernel(tmp_path):
    """Two rows of 128k on 132 SMs: the partial means and variances in one kernel (the variance
    computes the mean it also stores), never one kernel per row; the normalisation a pointwise kernel."""
    t = build(_ln(tmp_path), "triton", "h100")
    kernels = t.program.kernels()
    assert all(k.kind != "rownorm" for k in kernels)
    partial = [k for k in kernels if k.kind == "reduce" and k.out.shape == (2, 32)]
    assert any(len(k.outs()) == 2 for k in partial), [k.name for k in partial]
    assert any("split" in str(n.meta) for n in t.graph.nodes)


def test_the_same_program_on_a_cpu_keeps_one_kernel_per_row(tmp_path):
    # two rows on two cores: every core has a row; the whole-tensor sum (one row) is split
    t = build(_ln(tmp_path), "cpp", "cpu")
    assert any(k.kind == "rownorm" for k in t.program.kernels())


COLS = """import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, g, x):
        return (g * x).sum(dim=(0, 1)), g.mean(dim=(0, 1))


def get_inputs():
    return [torch.randn(8, 256, 128), torch.randn(8, 256, 128)]


def get_init_inputs():
    return []
"""


def test_column_sums_split_verify_in_triton(tmp_path):
    """A norm weight's and a bias's gradients: partial column sums over row chunks, then their sum."""
    p = tmp_path / "cols.py"
    p.write_text(COLS)
    t = translate(p, "triton", "h100", tmp_path / "m.py", timing=False, seeds=(0, 1))
    assert t.verdict.accepted, t.verdict.line()
    assert sum(bool(n.meta.get("split")) for n in t.graph.nodes) == 4


@pytest.mark.parametrize("dsl,target", [("cpp", "cpu"), ("triton", "h100"), ("pallas", "h100")])
def test_split_reductions_verify(dsl, target, tmp_path):
    c, n = (32, 4096) if dsl == "cpp" else (16, 4096)
    p = _ln(tmp_path, c, n)
    t = translate(p, dsl, target, tmp_path / "m.py", timing=False, seeds=(0, 1))
    assert t.verdict.accepted, t.verdict.line()
    assert any(n.meta.get("split") for n in t.graph.nodes)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc (the CUDA toolkit)")
def test_split_reductions_compile_in_cuda_c(tmp_path):
    t = translate(_ln(tmp_path), "cuda-c", "h100", tmp_path / "m.py", timing=False, seeds=(0,))
    assert_verified_or_compiled(t)
    assert any(n.meta.get("split") for n in t.graph.nodes)
