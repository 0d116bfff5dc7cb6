"""C++ serial fp32 sums in SUM_LANES fp32 partials (SIMD lanes of several vectors) per chunk of the
innermost axis (CHUNK_SUM terms, or the prefetch distance where the sum prefetches), each chunk's sum
added to the double accumulator; an innermost axis shorter than CHUNK_MIN keeps double lanes. Rows longer than a chunk
(tails included) verified against the float64 reference."""

from __future__ import annotations

import re

from akg_agent.translate import build, render
from dsl_backends.cpp.style import STYLE
from dsl_backends.cstyle import CHUNK_MIN, CHUNK_SUM, SUM_LANES

from .helpers import assert_source_verifies

LONG = 2 * CHUNK_SUM + 808  # two whole chunks and a tail
PREFETCH = STYLE.prefetch_bytes // 4  # floats: a prefetching sum's chunk
SUMS = f'''
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x, y, z):
        mean = x.mean(-1, keepdim=True)  # a row mean, then a variance that reads it: two chunked sums
        var = ((x - mean) ** 2).mean(-1, keepdim=True)
        return (x - mean) / torch.sqrt(var + 1e-5), torch.log_softmax(y, -1), z.sum(-1)


def get_inputs():
    # a large common offset: the variance's terms cancel, so an inexact mean shows in it; z's rows: too
    # long to unroll (unroll.WINDOW_MAX), too short to chunk
    return [torch.randn(6, {LONG}) + 1000.0, torch.randn(5, {LONG}) * 8.0, torch.randn(7, 64, {CHUNK_MIN - 2})]


def get_init_inputs():
    return []
'''


def test_fp32_sums_run_in_chunks_of_fp32_lanes_added_in_double(tmp_path):
    path = tmp_path / "sums.py"
    path.write_text(SUMS)
    text = render(build(path, "cpp", "cpu", tuned=False))
    # each chunk prefetches the next 4 KiB (PREFETCH floats) of its row-major rows, and is that long
    chunked = re.findall(rf"for \(int64_t (t\d+)_c = 0; \1_c < {LONG}; \1_c \+= {PREFETCH}\) {{\n"
                         rf"\s*for \(int64_t akg_pf = \1_c; akg_pf < std::min<int64_t>\({LONG}, \1_c \+ {PREFETCH}\); "
                         rf"akg_pf \+= 16\) __builtin_prefetch\(\w+ \+ \(.*\) \+ {PREFETCH} \+ akg_pf\);\n"
                         rf"\s*const int64_t \1_e = std::min<int64_t>\({LONG}, \1_c \+ {PREFETCH}\);\n"
                         rf"\s*float \1\[{SUM_LANES}\] = {{}};\n\s*int64_t \1_b = \1_c;\n"
                         rf"\s*for \(; \1_b \+ {SUM_LANES} <= \1_e; \1_b \+= {SUM_LANES}\) {{\n"
                         rf"\s*#pragma omp simd\n\s*for \(int64_t \1_l = 0; \1_l < {SUM_LANES}; \+\+\1_l\) {{\n"
                         rf"\s*const int64_t \w+ = \1_b \+ \1_l;\n", text)
    assert len(chunked) >= 3, text  # the mean, the variance, the log-softmax's sum of exps
    # each chunk's tail (808 is no multiple of the lanes) into its first partial, then the partials summed
    assert len(re.findall(r"(t\d+)\[0\] \+= \w+;\n\s*}\n\s*float \1_s = 0;\n", text)) >= 3, text
    # the short innermost axis: its sum keeps the double's own SIMD lanes
    short = re.search(rf"double (t\d+) = 0;\n\s*#pragma omp simd reduction\(\+:\1\)\n\s*for \(int64_t \w+ = 0; "
                      rf"\w+ < {CHUNK_MIN - 2};", text)
    assert short, text
    assert_source_verifies(path, text, tmp_path)


HINGE = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, p, t):  # KernelBench's hinge loss: t broadcast along p's rows, the mean split
        return torch.mean(torch.clamp(1 - p * t, min=0))


def get_inputs():
    return [torch.rand(512, 4096), torch.randint(0, 2, (4096,)).float() * 2 - 1]


def get_init_inputs():
    return []
'''


def test_a_broadcast_operand_of_a_split_sum_is_read_off_the_chunk_start(tmp_path):
    """The split mean's lanes read t at (r % 4096): one remainder per lane, no vector load (0.25x
    torch.compile); inside a chunk the remainder is the chunk start's plus the lane's offset."""
    path = tmp_path / "hinge.py"
    path.write_text(HINGE)
    text = render(build(path, "cpp", "cpu", tuned=False))
    lanes = re.findall(r"#pragma omp simd\n\s*for \(int64_t (t\d+)_l = 0;.*?\n(.*?)\1\[\1_l\] \+=", text, re.S)
    assert lanes, text
    for _, body in lanes:
        assert "% ((int64_t)4096)" not in body.replace(f"{_}_c % ((int64_t)4096)", ""), body
    assert_source_verifies(path, text, tmp_path)
