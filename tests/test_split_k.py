"""Split-K GEMMs (ir.passes.split `splitk`) and views a GEMM reads in place (ir.passes.strides): the split
keeps the product's value (the IR interpreter, float64), fires only for few output tiles over a long K
on a GPU target, its operands are read through their views (no copy kernels), a transposing view is
still copied, reshapes lower chunk by chunk (no division for a split axis), and translated modules
verify (Triton and Pallas through their CPU executors, CUDA-C compiled, C++ natively for the views)."""

from __future__ import annotations

import itertools
import math
import random
import shutil

import pytest
import torch

from akg_agent.translate import build, pipeline_for, translate
from dsl_backends import get_backend
from hardware_models.spec import load_target
from ir import run
from ir.graph import Graph
from ir.kernel.ir import Const, Expr, IOp, Var
from ir.kernel.lower import _chunked_index, _reshape_chunks
from ir.passes import run_passes
from ir.passes.fusion import fuse
from ir.passes.split import k_splits
from ir.passes.strides import reshape_strides
from ir.types import TensorType

from .helpers import assert_verified_or_compiled


def _mm(m: int, k: int, n: int, dtype: str = "f64") -> Graph:
    g = Graph("g")
    a, b = g.input("a", TensorType((m, k), dtype)), g.input("b", TensorType((k, n), dtype))
    g.outputs = [g.add("relu", [g.add("matmul", [a, b])])]
    return g


def test_k_splits_fill_the_units_with_deep_chunks():
    assert k_splits(256, 256, 524288, 132) == 64  # KernelBench #6: 4 tiles x 64 chunks of 8192
    assert k_splits(4096, 4096, 4096, 132) == 1  # 1024 tiles already
    assert k_splits(256, 256, 3 * 4097, 132) == 1  # no equal power-of-two chunks
    assert k_splits(256, 256, 4096, 132) == 2  # chunks stay 2048 deep at least
    assert k_splits(64, 64, 1 << 20, 0) == 1  # no units: off


def test_split_k_keeps_the_product():
    g = _mm(40, 1 << 14, 24)
    a, b = torch.randn(40, 1 << 14, dtype=torch.float64), torch.randn(1 << 14, 24, dtype=torch.float64)
    want = run(g, [a, b])[0]
    run_passes(g, "splitk{units=16}")
    mm = [n for n in g.nodes if n.op == "matmul"]
    assert len(mm) == 1 and mm[0].type.shape == (8, 40, 24), [str(n.type) for n in mm]
    torch.testing.assert_close(run(g, [a, b])[0], want, rtol=1e-12, atol=1e-9)


@pytest.mark.parametrize("why,g", [("bf16 partials", _mm(40, 1 << 14, 24, "bf16")),
                                   ("many tiles", _mm(2048, 1 << 14, 2048)), ("short K", _mm(40, 2048, 24))])
def test_what_is_not_split_k(why, g):
    run_passes(g, "splitk{units=16}")
    assert all(n.type.rank == 2 for n in g.nodes if n.op == "matmul"), why


def test_the_pipeline_splits_k_only_for_gpu_units():
    backend = get_backend("triton")
    assert "splitk{units=132}" in str(pipeline_for(backend, load_target("h200")))
    assert "splitk" not in str(pipeline_for(get_backend("cpp"), load_target("cpu")))


def test_split_operands_are_read_in_place_and_a_transpose_is_copied():
    g = _mm(40, 1 << 14, 24, "f32")
    run_passes(g, "splitk{units=16},fuse")
    kinds = [grp.kind for grp in g.plan.groups]
    assert kinds == ["contraction", "reduction"], g.plan.groups  # no copy of A or B
    g = Graph("t")
    a, b = g.input("a", TensorType((64, 32), "f32")), g.input("b", TensorType((48, 32), "f32"))
    g.outputs = [g.add("matmul", [a, g.add("permute", [b], {"dims": [1, 0]})])]
    assert [grp.kind for grp in fuse(g).groups] == ["pointwise", "contraction"]  # B^T: K contiguous, copied


@pytest.mark.parametrize("old,new", [((6, 8), (6, 2, 4)), ((6, 8), (48,)), ((1, 4), (4, 1)), ((2, 3, 4), (6, 4))])
def test_reshape_strides_of_contiguous_sources(old, new):
    got = reshape_strides(old, [math.prod(old[i + 1:]) for i in range(len(old))], new)
    assert got == [math.prod(new[i + 1:]) for i in range(len(new))]


def test_reshape_strides_refuse_merging_a_transpose():
    assert reshape_strides((8, 6), (1, 8), (48,)) is None  # a transposed [6, 8] cannot be flattened in place
    assert reshape_strides((8, 6), (1, 8), (2, 4, 6)) == [4, 1, 8]  # splitting its first axis can


def _value(e: Expr, env: dict[str, int]) -> int:
    if isinstance(e, Const):
        return int(e.value)
    if isinstance(e, Var):
        return env[e.name]
    assert isinstance(e, IOp), e
    a, b = _value(e.a, env), _value(e.b, env)
    return {"+": a + b, "*": a * b, "//": a // b if b else 0, "%": a % b if b else 0}[e.op]


def test_chunked_reshape_index_is_the_flat_resplit():
    rng = random.Random(0)
    factors = [1, 2, 3, 4, 5]
    for _ in range(60):
        dims = [rng.choice(factors) for _ in range(rng.randint(1, 4))]
        old = tuple(dims)
        flat = list(itertools.chain.from_iterable([d] if rng.random() < 0.5 else [1, d] for d in dims))
        new = tuple(flat) if rng.random() < 0.5 else (math.prod(dims[:2]), *dims[2:])
        chunks = _reshape_chunks(old, new)
        assert chunks is not None, (old, new)
        coords = [Var(f"c{i}", d) for i, d in enumerate(new)]
        idx = _chunked_index(old, new, chunks, coords)
        for point in itertools.product(*[range(d) for d in new]):
            f = sum(p * math.prod(new[i + 1:]) for i, p in enumerate(point))
            want = [f // math.prod(old[i + 1:]) % old[i] for i in range(len(old))]
            env = {f"c{i}": p for i, p in enumerate(point)}
            assert [_value(e, env) for e in idx] == want, (old, new, point)
    # a split axis needs no division: [6, 8] -> [6, 2, 4] reads row c0, column c1 * 4 + c2
    c = [Var("c0", 6), Var("c1", 2), Var("c2", 4)]
    text = [str(e) for e in _chunked_index((6, 8), (6, 2, 4), _reshape_chunks((6, 8), (6, 2, 4)) or [], c)]
    assert "//" not in text[1] and text[0] == str(c[0]), text


SPLITK = """import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, a, b):
        return torch.relu(torch.matmul(a, b)) * 0.5


def get_inputs():
    return [torch.randn(48, 32768), torch.randn(32768, 40)]


def get_init_inputs():
    return []
"""


def _splitk(tmp_path):
    p = tmp_path / "splitk.py"
    p.write_text(SPLITK)
    return p


def test_a_few_tile_gemm_on_the_h100_is_split(tmp_path):
    t = build(_splitk(tmp_path), "triton", "h100")
    kinds = [k.kind for k in t.program.kernels()]
    # the operands read in place; the sum of 16 partials (unrolled: a pointwise kernel) takes the epilogue
    assert kinds == ["matmul", "pointwise"], kinds
    assert not t.program.library_calls()


@pytest.mark.parametrize("dsl", ["triton", "pallas"])
def test_split_k_verifies(dsl, tmp_path):
    # pure: the cost model would leave Pallas's GEMM to the library. K = 4096 is split too (an eighth of the
    # interpreter's time: 80 s at 32768)
    p = _splitk(tmp_path)
    p.write_text(SPLITK.replace("32768", "4096"))
    t = translate(p, dsl, "h100", tmp_path / "m.py", timing=False, seeds=(0, 1), pure=True)
    assert t.verdict.accepted, t.verdict.line()
    assert [k.kind for k in t.program.kernels()] == ["matmul", "pointwise"]  # split: partials, then their sum
    assert any(n.op == "matmul" and n.type.rank == 3 for n in t.graph.nodes)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc (the CUDA toolkit)")
def test_split_k_compiles_in_cuda_c(tmp_path):
    t = translate(_splitk(tmp_path), "cuda-c", "h100", tmp_path / "m.py", timing=False, seeds=(0,))
    assert_verified_or_compiled(t)


VIEWS = """import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, a, b):
        # a batch axis moved and a split axis: both read in place by the GEMM
        return torch.matmul(a.permute(1, 0, 2), b.reshape(4, 24, 20))


def get_inputs():
    return [torch.randn(16, 4, 24), torch.randn(96, 20)]


def get_init_inputs():
    return []
"""


@pytest.mark.parametrize("dsl,target", [("cpp", "cpu"), ("triton", "h100"), ("pallas", "h100"), ("tilelang", "h100")])
def test_gemm_views_read_in_place_verify(dsl, target, tmp_path):
    p = tmp_path / "views.py"
    p.write_text(VIEWS)
    t = translate(p, dsl, target, tmp_path / "m.py", timing=False, seeds=(0, 1), pure=True)
    assert t.verdict.accepted, t.verdict.line()
    assert [k.kind for k in t.program.kernels()] == ["matmul"]
