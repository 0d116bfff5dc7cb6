"""C++ windows and nested reductions: a padded window's interior runs mask-free (vectorised), its
edges masked; a sum whose body holds a reduction of other axes (a variance) is a SIMD reduction."""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from akg_agent.translate import build, render
from akg_agent.verifier import verify
from dsl_backends.cstyle import ARG_BLOCK
from ir.errors import AkgError
from ir.kernel.interior import _grid_value, interior
from ir.kernel.ir import IOp, Load, walk

POOLS = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return F.max_pool2d(x, 3, 2, 1), F.avg_pool2d(x, 3, 1, 1), F.max_pool2d(x, 2, 2)


def get_inputs():
    return [torch.randn(2, 3, 37, 40)]


def get_init_inputs():
    return []
'''

VAR = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.var_mean(x, dim=-1)


def get_inputs():
    return [torch.randn(64, 300) * 3.0 + 100.0]


def get_init_inputs():
    return []
'''


def _load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _atoms(k):
    out = []
    for e in walk(k.expr):
        if isinstance(e, Load) and e.mask is not None:
            stack = [e.mask]
            while stack:
                m = stack.pop()
                if isinstance(m, IOp) and m.op == "and":
                    stack += [m.a, m.b]
                else:
                    out.append(m)
    return out


def test_a_padded_window_has_an_interior_where_every_column_condition_holds(tmp_path):
    path = tmp_path / "p.py"
    path.write_text(POOLS)
    t = build(path, "cpp", "cpu")
    padded = [k for k in t.program.kernels() if _atoms(k)]
    assert len(padded) == 3  # the unpadded 2x2 pool's masks are not proven true by lowering: all columns
    for k in padded:
        inside = interior(k)
        assert inside is not None and inside.row_conditions
        col = k.coords[-1]
        cols = [a for a in _atoms(k) if col.name in {x.name for x in walk(a) if hasattr(x, "extent")}]
        for c in range(col.extent):  # exactly the columns where every column condition holds
            holds = all(bool(_grid_value(a, {col.name: np.asarray(c)})) for a in cols)
            assert holds == (inside.lo <= c < inside.hi), (k.name, c)
        assert not any(isinstance(e, Load) and e.mask is not None for e in walk(inside.expr))
    # stride 2, pad 1 over 40 columns: output columns 1..19 read inside; stride 1 over 40: 1..38
    assert sorted((i.lo, i.hi) for i in map(interior, padded)) == [(0, 20), (1, 20), (1, 39)]


def test_padded_pools_run_their_interior_mask_free_and_match_torch_at_every_edge(tmp_path, monkeypatch):
    """NaN and -inf at corners and edges: the masked edge loops and the mask-free interior agree with
    torch; the interior loop vectorises (gcc's report) and no max calls fmax (gcc 12 keeps such a loop
    scalar on strided loads)."""
    path = tmp_path / "p.py"
    path.write_text(POOLS)
    text = render(build(path, "cpp", "cpu"))
    kernels = re.split(r'extern "C" (?:AKG_WIDE )?void (?=k\d)', text)[1:]
    assert len(kernels) == 3 and all("akg_lo" in k and "fmax" not in k for k in kernels)
    cand = tmp_path / "cand.py"
    cand.write_text(text)
    assert verify(path, cand, target="cpu", seeds=(0, 1)).accepted
    monkeypatch.setenv("AKG_CACHE_DIR", str(tmp_path / "cache"))
    mod = _load(cand, "pools_mod")
    x = torch.randn(2, 3, 37, 40)
    x[0, 0, 0, 0] = float("nan")
    x[0, 1, 36, 39] = float("-inf")
    x[1, 2, 0, 17] = float("nan")
    x[1, 0, 20, 0] = float("nan")
    x[1, 1, 18, 21] = float("nan")  # inside
    got = mod.ModelNew()(x)
    want = (F.max_pool2d(x, 3, 2, 1), F.avg_pool2d(x, 3, 1, 1), F.max_pool2d(x, 2, 2))
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, equal_nan=True)
    if shutil.which("g++") is None:
        pytest.skip("no g++ for the vectoriser's report")
    src = text.split("_AKG_SOURCE = r'''")[1].split("'''")[0]
    (tmp_path / "k.cpp").write_text(src)
    r = subprocess.run(["g++", "-O3", "-march=native", "-fopenmp", "-std=c++17", "-fopt-info-vec-optimized", "-c",
                        str(tmp_path / "k.cpp"), "-o", str(tmp_path / "k.o")], capture_output=True, text=True)
    vectorised = {int(m) for m in re.findall(r"k\.cpp:(\d+):\d+: optimized: loop vectorized", r.stderr)}
    lines = src.splitlines()
    interiors = [i + 1 for i, ln in enumerate(lines) if "akg_c = akg_lo;" in ln]
    assert len(interiors) == 3 and all({n, n + 1} & vectorised for n in interiors), (interiors, r.stderr[-2000:])


def test_a_sum_over_a_hoisted_inner_reduction_is_a_simd_reduction(tmp_path):
    """var = sum((x - mean)^2): the mean (a reduction of other axes) is computed once before the loop,
    and the loop is an OpenMP SIMD reduction; verified on values far from zero (cancellation)."""
    path = tmp_path / "p.py"
    path.write_text(VAR)
    text = render(build(path, "cpp", "cpu"))
    var = re.split(r'extern "C" (?:AKG_WIDE )?void', text)[1]
    # a SIMD reduction, or a chunk's lanes of partial sums (long enough rows)
    assert var.count("#pragma omp simd reduction") + len(re.findall(r"#pragma omp simd\n\s*for \(int64_t t\d+_l = 0;",
                                                                   var)) == 2, var
    cand = tmp_path / "cand.py"
    cand.write_text(text)
    assert verify(path, cand, target="cpu", seeds=(0, 1)).accepted


DEPTHWISE = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Conv2d(6, 12, 3, stride=2, padding=1, groups=6)  # channel multiplier 2, stride 2
        self.b = nn.Conv2d(12, 12, (3, 5), padding=(1, 2), dilation=(2, 1), groups=12, bias=False)
        self.c = nn.Conv1d(6, 6, 5, padding=2, groups=6)
        self.bn = nn.BatchNorm2d(12)

    def forward(self, x, s):
        y = torch.relu(self.bn(self.a(x)))
        return self.b(y)[:, :, 1:-1], self.c(s) * 2.0


def get_inputs():
    return [torch.randn(2, 6, 19, 33), torch.randn(3, 6, 40)]


def get_init_inputs():
    return []
'''


@pytest.mark.parametrize(("dsl", "target"), [("cpp", "cpu"), ("triton", "h100")])
def test_depthwise_convolutions_are_generated_as_unrolled_windows(dsl, target, tmp_path):
    """A depthwise convolution (groups = input channels, a small window) with conv=generated: a window
    sum per channel (a multiplier of 2, stride, dilation, padding, 1-d and 2-d), unrolled into a pointwise
    kernel with its epilogue; no library call, verified (Triton through its interpreter). The tuner
    offers the strategy where the backend has windows."""
    from akg_agent.tune import strategies_for

    path = tmp_path / "p.py"
    path.write_text(DEPTHWISE)
    base = build(path, dsl, target, tuned=False)
    assert sum(s.op == "conv" for s in base.program.library_calls()) == 3
    assert "conv=generated" in [s.describe().split(", ")[1] for s in strategies_for(base)]
    t = build(path, dsl, target, tuned=False, conv="generated")
    # the 3x5 window unrolled too (unroll.BODY_MAX holds a padded 3x3x3 average: 27 positions of 43 nodes)
    assert not t.program.library_calls() and [k.kind for k in t.program.kernels()] == ["pointwise"] * 3
    cand = tmp_path / "cand.py"
    cand.write_text(render(t))
    v = verify(path, cand, target=target, seeds=(0, 1))
    assert v.accepted, v.line()


@pytest.mark.parametrize("name", ["l2_conv_relu_biasadd", "conv2d_asym_kernel"])
def test_cpp_convolutions_as_implicit_gemms_verify_natively(name, tmp_path):
    """conv=generated in C++: an ungrouped convolution is the blocked GEMM template over the implicit
    operand (the window read where it lands, zeros in the padding), its epilogue fused; the reduction
    index's channel and kernel offsets come from tables filled once per call, not divided out per
    element of A; verified."""
    from .conftest import problem_path

    t = build(problem_path(name), "cpp", "cpu", tuned=False, conv="generated")
    assert not t.program.library_calls() and "matmul" in [k.kind for k in t.program.kernels()]
    text = render(t)
    pack = text.split("for (int64_t akg_q = 0; akg_q < akg_kw; ++akg_q) {")[1].split("akg_ap[akg_i][akg_q] =")[0]
    assert "akg_kv0[" in pack and "/ ((int64_t)" not in pack and "% ((int64_t)" not in pack, pack
    cand = tmp_path / "cand.py"
    cand.write_text(text)
    v = verify(problem_path(name), cand, target="cpu", seeds=(0, 1))
    assert v.accepted, v.line()


@pytest.mark.parametrize("name", ["scan_cumsum_cumprod", "scan_reverse_cumsum", "scan_exclusive_cumsum",
                                  "scan_masked_cumsum"])
def test_cpp_scans_are_generated_and_verify(name, tmp_path):
    """cumsum / cumprod in C++ by default: rows in parallel, a running accumulator along the axis
    (reversed where the program flips it, exclusive, masked), the epilogue in the same pass; verified."""
    from .conftest import problem_path

    t = build(problem_path(name), "cpp", "cpu", tuned=False)
    scans = [k for k in t.program.kernels() if k.kind == "scan"]
    assert scans and not [s for s in t.program.library_calls() if s.op in ("cumsum", "cumprod")]
    src = render(t)
    assert "akg_acc" in src
    cand = tmp_path / "cand.py"
    cand.write_text(src)
    v = verify(problem_path(name), cand, target="cpu", seeds=(0, 1))
    assert v.accepted, v.line()


ARG = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x.argmax(-1), x.amin(-1), torch.softmax(x, -1), x.argmin(-1)


def get_inputs():
    return [torch.randn(24, 2500)]


def get_init_inputs():
    return []
'''


def test_max_min_and_arg_reductions_run_in_simd_lanes_with_torchs_ties_and_nans(tmp_path, monkeypatch):
    """A row's max/min as OpenMP SIMD reductions with NaN noted apart; its argmax/argmin the same per block
    of ARG_BLOCK elements (two full blocks and a short one here), the index searched in a block that beats
    the running extreme: NaN wins (its first index, a NaN after a larger value too), the first index among
    equal values within a block and across blocks, all -inf rows, the row's last element alone; against torch."""
    assert 2 * ARG_BLOCK < 2500 < 3 * ARG_BLOCK
    path = tmp_path / "p.py"
    path.write_text(ARG)
    text = render(build(path, "cpp", "cpu", tuned=False))
    assert text.count("_blk_nan) {") == 2 and text.count("#pragma omp simd reduction(m") == 4, text
    cand = tmp_path / "cand.py"
    cand.write_text(text)
    assert verify(path, cand, target="cpu", seeds=(0, 1)).accepted
    monkeypatch.setenv("AKG_CACHE_DIR", str(tmp_path / "cache"))
    mod = _load(cand, "arg_mod")
    x = torch.randn(24, 2500)
    x[0, 5] = x[0, 90] = x[0, 1500] = x[0, 2499] = 50.0  # ties within a block and across blocks: the first wins
    x[1, 10], x[1, 2400] = 99.0, float("nan")  # NaN in the short block, after the largest value
    x[2, 1030] = x[2, 7] = x[2, 3] = float("nan")  # NaNs in two blocks: the first
    x[3] = float("-inf")
    x[4, 1800] = x[4, 17] = x[4, 1] = -50.0  # min ties
    x[5, 2499] = 60.0  # the largest, the row's last element alone
    x[6, 1100] = x[6, 2000] = 70.0  # a tie first seen in a later block
    x[7, 1023], x[7, 1024] = 80.0, 81.0  # the blocks' edge
    got = mod.ModelNew()(x)
    want = (x.argmax(-1), x.amin(-1), torch.softmax(x, -1), x.argmin(-1))
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, equal_nan=True)


SEPARABLE = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.dw = nn.Conv2d(8, 8, 3, padding=1, groups=8, bias=False)
        self.pw = nn.Conv2d(8, 16, 1)

    def forward(self, x):
        return torch.relu(self.pw(torch.relu(self.dw(x))))


def get_inputs():
    return [torch.randn(2, 8, 20, 24)]


def get_init_inputs():
    return []
'''


def test_a_depthwise_separable_block_may_generate_its_depthwise_convolution_alone(tmp_path):
    """conv=depthwise: the depthwise convolution generated (an unrolled window with its relu), the 1x1
    one left to the library with its epilogue generated; the tuner offers it beside conv=generated
    (both generated) where a program has both kinds; verified."""
    from akg_agent.tune import strategies_for

    path = tmp_path / "p.py"
    path.write_text(SEPARABLE)
    convs = [s.describe().split(", ")[1] for s in strategies_for(build(path, "cpp", "cpu", tuned=False))]
    assert convs == ["conv=library", "conv=generated", "conv=depthwise", "conv=channels-last"]
    t = build(path, "cpp", "cpu", tuned=False, conv="depthwise")
    [lib] = t.program.library_calls()
    assert lib.op == "conv" and lib.attrs["groups"] == 1 and t.program.kernels()[0].kind == "pointwise"
    cand = tmp_path / "cand.py"
    cand.write_text(render(t))
    v = verify(path, cand, target="cpu", seeds=(0, 1))
    assert v.accepted, v.line()
    with pytest.raises(AkgError, match="does not generate depthwise convolutions"):
        build(path, "numpy", "cpu", conv="depthwise")  # the example backend lists no window


STRIDED_ARG = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x.argmax(1), x.argmin(1)


def get_inputs():
    return [torch.randn(3, 40, 37)]


def get_init_inputs():
    return []
'''


def test_arg_reductions_over_a_strided_axis_sweep_the_contiguous_outputs(tmp_path, monkeypatch):
    """argmax/argmin over dim 1 (a strided axis) take the strided template: the reduction loop outside, the
    contiguous outputs in SIMD lanes, a value and an index per output (the plain template read one element
    per output per step); torch's NaN and tie rules, against torch."""
    path = tmp_path / "p.py"
    path.write_text(STRIDED_ARG)
    text = render(build(path, "cpp", "cpu", tuned=False))
    assert text.count("_i[akg_c] = akg_w ? akg_j") == 2, text
    cand = tmp_path / "cand.py"
    cand.write_text(text)
    assert verify(path, cand, target="cpu", seeds=(0, 1)).accepted
    monkeypatch.setenv("AKG_CACHE_DIR", str(tmp_path / "cache"))
    mod = _load(cand, "strided_arg_mod")
    x = torch.randn(3, 40, 37)
    x[0, 5, 0] = x[0, 30, 0] = 50.0  # a tie: the first wins
    x[1, 3, 2], x[1, 20, 2], x[1, 25, 2] = 99.0, float("nan"), float("nan")  # the first NaN, after the largest
    x[2, :, 4] = float("-inf")
    x[2, 7, 5] = x[2, 2, 5] = -50.0  # a min tie
    got = mod.ModelNew()(x)
    for g, w in zip(got, (x.argmax(1), x.argmin(1))):
        torch.testing.assert_close(g, w)


def test_integer_reductions_over_a_strided_axis_keep_int64_accumulators(tmp_path):
    """Sums, maxima and argmax of int64 values near 2**59 over dim 1: the strided template's double
    accumulators would round them (74 of 74 sums wrong), so they keep the plain template's int64 ones."""
    path = tmp_path / "p.py"
    path.write_text(STRIDED_ARG.replace("return x.argmax(1), x.argmin(1)", "return x.sum(1), x.amax(1), x.argmax(1)")
                    .replace("torch.randn(3, 40, 37)", "torch.randint(2**58, 2**59, (2, 30, 37))"))
    text = render(build(path, "cpp", "cpu", tuned=False))
    assert "akg_w ? akg_j" not in text and "double akg_acc" not in text, text
    cand = tmp_path / "cand.py"
    cand.write_text(text)
    v = verify(path, cand, target="cpu", seeds=(0, 1))
    assert v.accepted, v.line()
