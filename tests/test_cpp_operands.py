"""The C++ GEMM reads a transposed input in place (capability `transposed_bytes` = 8): no copy kernel before it,
each operand packed along its stored rows (a power-of-two row would otherwise put a packing tile's
column in one cache set), verified against the reference; GPU backends keep the copy."""

from __future__ import annotations

import re

import pytest

from akg_agent.translate import build, render
from akg_agent.verifier import verify

SRC = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(45, 70))

    def forward(self, a, b):
        return {expr}


def get_inputs():
    return [torch.randn{a}, torch.randn{b}]


def get_init_inputs():
    return []
'''

CASES = {  # expression, operand shapes, whether A is read along its rows and B along its columns
    "a-transposed": ("a.T @ b.T", (70, 37), (45, 70), True, False),
    "b-transposed": ("a @ b.T", (37, 70), (45, 70), False, False),
    "a-transposed-b-rows": ("a.T @ b", (70, 37), (70, 45), True, True),
    "plain": ("a @ b", (37, 70), (70, 45), False, True),
    "weight-transposed": ("a @ self.w.T + b", (37, 70), (37, 45), False, False),
    "batched-keys": ("torch.bmm(a, b.transpose(1, 2))", (3, 29, 70), (3, 45, 70), False, False),
}
FEW_ROWS = {  # batch-sized: the streaming template (no packing) reads the transposed views in place too
    "few-rows-a-transposed": ("a.T @ b.T", (70, 3), (45, 70)),
    "few-rows-b-rows": ("a.T @ b", (70, 2), (70, 45)),
}


def source(expr: str, a: tuple[int, ...], b: tuple[int, ...]) -> str:
    return SRC.replace("{expr}", expr).replace("{a}", str(a)).replace("{b}", str(b))


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_transposed_input_is_read_in_place_by_the_packing(case, tmp_path):
    expr, a, b, a_rows, b_cols = CASES[case]
    path = tmp_path / "p.py"
    path.write_text(source(expr, a, b))
    t = build(path, "cpp", "cpu", pure=True)
    assert [k.kind for k in t.program.kernels()] == ["matmul"], t.program.kernels()
    text = render(t)
    # B's packing tile: the inner loop along B's stored rows (its columns, a strip of NR at a time to a
    # contiguous destination; or K where it is transposed)
    if b_cols:
        strip = r"for \(int64_t akg_col = akg_s;[^\n]*\n(\s*const[^\n]*\n)*\s*akg_dst\[akg_col\] = "
        assert re.search(strip, text), text
    else:
        inner = re.search(r"for \(int64_t akg_col = akg_c0;[^\n]*\n\s*for \(int64_t akg_(p|col) = ", text)
        assert inner is not None and inner.group(1) == "p", text
    # A's panel: K outside the block's rows where A is read along its rows
    after_k = text.split("for (int64_t akg_q = 0; akg_q < akg_kw; ++akg_q) {", 1)[1].split("\n")[1:3]
    assert any("for (int akg_i = 0; akg_i <" in line for line in after_k) == a_rows, text
    cand = tmp_path / "cand.py"
    cand.write_text(text)
    v = verify(path, cand, target="cpu", seeds=(0, 1))
    assert v.accepted, v.line()


def test_gpu_backends_keep_the_copy(tmp_path):
    path = tmp_path / "p.py"
    path.write_text(source("a.T @ b.T", (70, 37), (45, 70)))
    kinds = [k.kind for k in build(path, "triton", "h100").program.kernels()]
    assert kinds.count("matmul") == 1 and len(kinds) > 1, kinds


@pytest.mark.parametrize("case", sorted(FEW_ROWS))
def test_few_rows_read_transposed_inputs_in_place(case, tmp_path):
    expr, a, b = FEW_ROWS[case]
    path = tmp_path / "p.py"
    path.write_text(source(expr, a, b))
    t = build(path, "cpp", "cpu", pure=True)
    assert [k.kind for k in t.program.kernels()] == ["matmul"], t.program.kernels()
    text = render(t)
    assert "akg_p0" not in text  # no packing: the streaming template
    cand = tmp_path / "cand.py"
    cand.write_text(text)
    v = verify(path, cand, target="cpu", seeds=(0, 1))
    assert v.accepted, v.line()
