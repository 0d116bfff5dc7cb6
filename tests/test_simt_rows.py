"""A row a SIMT group sweeps more than once (a variance after its mean, a layer norm's output after both)
is read from memory once: each thread keeps its elements in registers (dsl_backends/simt.py), where
the row fits; longer rows keep the strided loop."""

from __future__ import annotations

import re
import shutil

import pytest

from akg_agent.translate import build, render, translate
from dsl_backends.simt import KEEP_PER_SWEEP

from .helpers import assert_verified_or_compiled

PROGRAM = """import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln = nn.LayerNorm({n})

    def forward(self, x):
        var, mean = torch.var_mean(x, dim=-1)
        return var, mean, self.ln(x)


def get_inputs():
    return [torch.randn({rows}, {n}) * 3 + 1]


def get_init_inputs():
    return []
"""
TARGETS = {"cuda-c": "h100", "metal": "m4-max"}


def _problem(tmp_path, n: int, rows: int = 6):
    p = tmp_path / f"rows_{n}.py"
    p.write_text(PROGRAM.format(n=n, rows=rows))
    return p


def _kernels(src: str) -> dict[str, str]:
    """Each kernel's text, by name (CUDA's `__global__` or Metal's `kernel void`)."""
    head = r"(?:extern \"C\" __global__|kernel void)"
    parts = [p for p in re.split(rf"\n(?={head})", src) if re.match(head, p)]
    return {m.group(1): p for p in parts if (m := re.search(r"(k\d+_\w+)\(", p))}


@pytest.mark.parametrize("dsl", sorted(TARGETS))
def test_each_row_is_loaded_once_where_it_fits_in_registers(dsl, tmp_path):
    t = build(_problem(tmp_path, 300), dsl, TARGETS[dsl])
    ks = _kernels(render(t))
    var = next(v for k, v in ks.items() if "var_mean" in k)
    norm = next(v for k, v in ks.items() if "layer_norm" in k)
    # 300 elements over 256 threads: two unrolled steps, the second cut at the row's end
    assert "akg_keep0[2];" in var and "if (" in var and ">= 300) break;" in var
    for text in (var, norm):  # two sweeps (and the layer norm's output columns), one load of x each
        assert len(re.findall(r"\bx\[", text)) == 1, text
    assert re.search(r"akg_keep0\[\w+\]\)+ - ", norm.split("akg_col")[-1])  # the output reads the kept row


@pytest.mark.parametrize("dsl", sorted(TARGETS))
def test_a_row_longer_than_the_registers_keeps_the_strided_loop(dsl, tmp_path):
    n = 256 * KEEP_PER_SWEEP + 8
    ks = _kernels(render(build(_problem(tmp_path, n, rows=2), dsl, TARGETS[dsl])))
    var = next(v for k, v in ks.items() if "var_mean" in k)
    assert "akg_keep" not in var and not re.search(r"#pragma unroll\n", var)  # no sweep unrolled whole
    assert var.count("#pragma unroll 4") == 2  # both sweeps (mean, variance): four loads in flight a thread
    assert len(re.findall(r"\bx\[", var)) == 2


@pytest.mark.parametrize("n", [300, 256 * KEEP_PER_SWEEP + 8])
def test_kept_rows_give_the_reference_values_in_the_metal_emulator(n, tmp_path):
    t = translate(_problem(tmp_path, n, rows=3), "metal", "m4-max", tmp_path / "m.py", timing=False, seeds=(0, 1))
    assert t.verdict.accepted, t.verdict.line()


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc (the CUDA toolkit)")
def test_kept_rows_compile_with_nvcc(tmp_path):
    t = translate(_problem(tmp_path, 300), "cuda-c", "h100", tmp_path / "m.py", timing=False, seeds=(0,))
    assert_verified_or_compiled(t)


SOFTMAX = """import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=1), torch.log_softmax(x * 0.5, dim=1)


def get_inputs():
    x = torch.randn(4, {n}) * 4
    x[0, :3000] = float("-inf")  # leading elements of every thread -inf: a running maximum of -inf
    x[2, ::3] = float("-inf")
    return [x]


def get_init_inputs():
    return []
"""


def test_a_long_softmax_row_is_swept_once_for_its_maximum_and_sum(tmp_path):
    n = 256 * KEEP_PER_SWEEP + 300  # longer than the registers keep
    prob = tmp_path / "softmax_long.py"
    prob.write_text(SOFTMAX.format(n=n))
    ks = _kernels(render(build(prob, "cuda-c", "h100")))
    assert len(ks) == 2
    for text in ks.values():  # one sweep for the maximum and the sum, one for the output
        assert len(re.findall(r"\bx\[", text)) == 2 and "akg_block_reduce<2>" in text, text
    t = translate(prob, "metal", "m4-max", tmp_path / "m.py", timing=False, seeds=(0, 1))
    assert t.verdict.accepted, t.verdict.line()
