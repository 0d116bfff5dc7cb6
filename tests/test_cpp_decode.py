"""A decode step on the CPU: a few rows through a linear layer stored [K, N] (GPT-2's Conv1D) take the vector
variant of the few-rows GEMM, attention of one query against a key/value cache takes the few-query template,
its cache-or-new-token key rows printed as branches (no clamped gathers), and a masked key contributes 0
(a value of 1e36 there shows any leftover weight), in the few-query and the flash template alike."""

from __future__ import annotations

import re

import pytest

import akg_agent.translate as tr
from dsl_backends.cpp.gemv import along_n
from hardware_models.spec import load_target
from ir.kernel.analysis import split_gemm

DECODE = '''import torch
import torch.nn as nn


def _heads(x):  # each key/value head serves two query heads (Hugging Face's repeat_kv)
    b, h, n, e = x.shape
    return x[:, :, None].expand(b, h, 2, n, e).reshape(b, 2 * h, n, e)


class Model(nn.Module):
    """{rows} new queries against a cache of 40 positions (4 heads, 2 of keys and values: grouped), the new
    keys and values appended; the first 3 positions of sequence 1 are padding (finfo.min, as Hugging Face
    masks), their values huge."""

    def forward(self, q, k_new, v_new, cache):
        k = _heads(torch.cat([cache[0], k_new], dim=2))
        v = torch.cat([cache[1], v_new], dim=2)
        pad = ((torch.arange(v.shape[2]) < 3) & (torch.arange(2)[:, None] == 1)).view(2, 1, 1, -1)
        v = _heads(v.masked_fill(pad.transpose(-1, -2), 1e36))
        s = (q @ k.transpose(-1, -2)) / 4.0 + torch.zeros(pad.shape).masked_fill(pad, torch.finfo(torch.float32).min)
        return torch.softmax(s, dim=-1) @ v


def get_inputs():
    return [torch.randn(2, 4, {rows}, 16), torch.randn(2, 2, {rows}, 16), torch.randn(2, 2, {rows}, 16),
            torch.randn(2, 2, 2, 40, 16)]


def get_init_inputs():
    return []
'''

GEMV = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(64, 96) * 0.1)  # [K, N], as GPT-2's Conv1D
        self.b = nn.Parameter(torch.randn(96))
        self.lin = nn.Linear(96, 48)  # [N, K]

    def forward(self, x):
        h = torch.addmm(self.b, x.view(-1, 64), self.w).view(3, 1, 96)
        return self.lin(torch.relu(h))


def get_inputs():
    return [torch.randn(3, 1, 64)]


def get_init_inputs():
    return []
'''


def _kernel_source(source: str, name: str) -> str:
    return source.split(f" {name}(", 1)[1].split('extern "C"', 1)[0]


@pytest.mark.parametrize("rows", [1, 6])
def test_decode_attention_verifies_and_masked_keys_weigh_nothing(tmp_path, rows):
    f = tmp_path / f"decode_{rows}.py"
    f.write_text(DECODE.format(rows=rows))
    t = tr.translate(f, "cpp", "cpu", timing=False, seeds=(0, 1), pure=True)
    assert t.verdict.accepted, t.verdict.reason
    (k,) = [k for k in t.program.kernels() if k.kind == "attention"]
    body = _kernel_source(t.source, k.name)
    few = "scores, then exponents" in body
    assert few == (rows == 1)
    if few:  # a key row is the cache's or the new token's for every lane: a branch, no clamped index
        assert "std::max<int64_t>(" not in body.split("for (int64_t akg_j = 0;", 1)[1].split("{\n", 1)[1]
        assert re.search(r"\(k\d+ \? cache\[", body), body


def test_few_rows_gemm_streams_a_k_by_n_weight_in_vectors(tmp_path):
    f = tmp_path / "gemv.py"
    f.write_text(GEMV)
    t = tr.translate(f, "cpp", "cpu", timing=False, seeds=(0, 1), pure=True)
    assert t.verdict.accepted, t.verdict.reason
    gemms = [k for k in t.program.kernels() if k.kind == "matmul"]
    kinds = sorted((along_n(k), tuple(e for _, e in split_gemm(k).cols)) for k in gemms)
    assert kinds == [(False, (48,)), (True, (1, 96))], kinds  # the view's column of extent 1 aside
    vector = next(k for k in gemms if along_n(k))
    assert "akg_part[3][" in _kernel_source(t.source, vector.name)
    assert int(t.schedules[vector.name]["NC"]) % min(int(load_target("cpu").chip("simd_width")), 8) == 0


MATVEC = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Linear(512, 1)  # a scoring head: one output column

    def forward(self, a, x):
        return torch.relu(a @ x) + self.w(a)


def get_inputs():
    return [torch.randn(40, 512), torch.randn(512, 1)]


def get_init_inputs():
    return []
'''


def test_a_matrix_vector_product_by_rows_is_a_row_dot_in_simd_lanes(tmp_path):
    """One output column and more rows than the streaming template takes: each output a dot product of a
    row, swept along K in SIMD lanes (the blocked template's register tile wasted 31 of 32 lanes: KernelBench's
    matrix-vector product ran 0.25x eager); a weight of one row is not packed."""
    f = tmp_path / "matvec.py"
    f.write_text(MATVEC)
    t = tr.translate(f, "cpp", "cpu", timing=False, seeds=(0, 1), pure=True)
    assert t.verdict.accepted, t.verdict.reason
    gemms = [k for k in t.program.kernels() if k.kind == "matmul"]
    assert len(gemms) == 2, [k.name for k in t.program.kernels()]
    for k in gemms:
        src = _kernel_source(t.source, k.name)
        assert "#pragma omp simd" in src and "akg_bpc" not in src and "MR" not in str(t.schedules[k.name]), src


HEADS_OF_TWO = '''import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def forward(self, x):
        b, l, d = x.shape
        q = k = v = x.view(b, l, 4, d // 4).transpose(1, 2)
        return F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, l, d) * 2.0


def get_inputs():
    return [torch.randn(2, 2, 16)]


def get_init_inputs():
    return []
'''


def test_two_queries_per_block_keep_their_row_coordinates_apart(tmp_path):
    """Two queries (a ViT's class token and one patch, KernelBench level 3 #32) in the few-query template:
    each query's score row decodes its coordinates under the same names, so each sits in a scope of its own
    (a redeclaration failed to compile)."""
    f = tmp_path / "two.py"
    f.write_text(HEADS_OF_TWO)
    t = tr.translate(f, "cpp", "cpu", timing=False, seeds=(0, 1))
    assert t.verdict.accepted, t.verdict.reason
    (k,) = [k for k in t.program.kernels() if k.kind == "attention"]
    assert "scores, then exponents" in _kernel_source(t.source, k.name)
