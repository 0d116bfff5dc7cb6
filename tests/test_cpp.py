"""C++ specifics: the blocked GEMM's edges (row, column and K tails; blocks spanning batches or inside them)."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest
import torch
import torch.nn.functional as F

from akg_agent.translate import build, render
from akg_agent.verifier import verify
from dsl_backends import get_backend
from dsl_backends.cpp.gemv import along_n
from dsl_backends.cpp.tile import vector_width

LINEAR = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(300, 37)

    def forward(self, x):
        return torch.tanh(self.fc(x * 0.5))


def get_inputs():
    return [torch.randn(13, 300)]


def get_init_inputs():
    return []
'''

BMM = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.bmm(a, b) + 1.0


def get_inputs():
    return [torch.randn(3, 5, 70), torch.randn(3, 70, 19)]


def get_init_inputs():
    return []
'''


BMM_WHOLE_BLOCKS = BMM.replace("(3, 5, 70)", "(3, 24, 70)")  # a batch's 24 rows: whole blocks of MR 4, 6, 8 or 12
BMM_PRIME_ROWS = BMM.replace("(3, 5, 70)", "(3, 13, 70)")  # no MR from the tile down to 4 rows divides 13
BATCH_ROWS = {BMM: 5, BMM_WHOLE_BLOCKS: 24, BMM_PRIME_ROWS: 13}


@pytest.mark.parametrize("src", [LINEAR, BMM, BMM_WHOLE_BLOCKS, BMM_PRIME_ROWS],
                         ids=["linear", "bmm", "bmm-whole-blocks", "bmm-prime-rows"])
@pytest.mark.parametrize("tile", [None, {"MR": 4, "NR": 8, "NB": 16, "KC": 32, "COLS_OUTER": 0},
                                  {"MR": 4, "NR": 8, "NB": 16, "KC": 32, "COLS_OUTER": 1},
                                  {"MR": 2, "NR": 32, "NB": 64, "KC": 32, "COLS_OUTER": 0}],
                         ids=["default", "small-rows-outer", "small-cols-outer", "wide-tile"])
def test_blocked_gemm_edges(src, tile, tmp_path):
    path = tmp_path / "p.py"
    path.write_text(src)
    t = build(path, "cpp", "cpu")
    [k] = [k for k in t.program.kernels() if k.kind == "matmul"]
    assert {"MR", "NR", "NB", "KC"} <= set(t.schedules[k.name])
    if tile:  # several column blocks and K panels, tails everywhere, row blocks across batches
        t.schedules[k.name] = t.schedules[k.name].replace(**tile)
    s = t.schedules[k.name]
    text = render(t)
    outer = "akg_cb" if s["COLS_OUTER"] else "akg_rb"  # the block loop right after the parallel pragma
    assert re.search(rf"parallel for collapse\(2\)[^\n]*\n\s*for \(int64_t {outer} = 0", text)
    per_batch = BATCH_ROWS.get(src, 0)
    if not tile and per_batch:  # a batched GEMM's default MR divides a batch's rows, down to 4 rows
        assert (per_batch % s["MR"] == 0) == (src is not BMM_PRIME_ROWS), s
    if src is LINEAR or per_batch % s["MR"] == 0:  # one B a block: the vector register tile, vectors the host has
        vec = vector_width(s["NR"], int(t.target.chip("simd_width")))
        assert vec and vec <= t.target.chip("simd_width")
        nv = s["NR"] // vec  # vectors a row: the last row's last one is there, no further one
        assert f"vector_size({4 * vec})" in text and f"akg_c{s['MR'] - 1}_{nv - 1} +=" in text, text
        assert f"akg_c{s['MR'] - 1}_{nv} +=" not in text
        assert f"__builtin_prefetch(akg_bq + (akg_q + {1024 // (4 * s['NR'])}) * {s['NR']} + 0);" in text  # panel ahead
        # each panel's sums reach the double accumulators half a vector at a time, not lane by lane
        assert "__builtin_convertvector" in text and "akg_l <" not in text
    else:  # rows of a block may lie in different batches (each its own B): the array tile
        assert f"akg_c[{s['MR']}][{s['NR']}]" in text
    cand = tmp_path / "cand.py"
    cand.write_text(text)
    v = verify(path, cand, target="cpu", seeds=(0, 1))
    assert v.accepted, v.line()


SELECT_EXP = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def forward(self, x):
        return F.leaky_relu(x, 0.2) + torch.exp(-x.abs()) * torch.tanh(x)


def get_inputs():
    return [torch.randn(64, 96)]


def get_init_inputs():
    return []
'''


def test_pointwise_loops_vectorise_with_vector_math(tmp_path, monkeypatch):
    """A select and transcendental calls in one loop: the select is bitwise (gcc 12 does not if-convert
    a loop that calls a vector function) and expf/tanhf are libmvec's vector versions, so the library
    calls their SIMD variants; loads at the output's own index read at the flat index (row x 96 + column:
    rows in parallel, a SIMD loop along each row)."""
    path = tmp_path / "p.py"
    path.write_text(SELECT_EXP)
    t = build(path, "cpp", "cpu")
    text = render(t)
    body = re.split(r'extern "C" (?:AKG_WIDE )?void', text)[1]
    assert "akg_select<float>(" in text and "expf(" in text and "x[(akg_o * 96 + akg_c)]" in text and " ? " not in body
    mod, syms = _load_with_symbols(text, tmp_path, monkeypatch)
    assert "_expf" in syms and "_ZGV" in syms, syms
    x = torch.randn(64, 96)
    torch.testing.assert_close(mod.ModelNew()(x), F.leaky_relu(x, 0.2) + (-x.abs()).exp() * x.tanh())


def _load_with_symbols(text: str, tmp_path, monkeypatch) -> tuple:
    """A written module loaded here, and the dynamic symbols of its compiled kernels (skips where the host
    has no libmvec of every x86 width: there the same calls stay scalar)."""
    import importlib.util
    import shutil
    import subprocess

    monkeypatch.setenv("AKG_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "m.py").write_text(text)
    spec = importlib.util.spec_from_file_location("m", tmp_path / "m.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    if not mod._akg_mvec() or shutil.which("nm") is None:
        pytest.skip("no libmvec with every x86 width here: the same calls stay scalar")
    [so] = (tmp_path / "cache").rglob("kernels.so")
    return mod, subprocess.run(["nm", "-D", str(so)], capture_output=True, text=True).stdout


def test_a_blocked_gemms_epilogue_vectorises_with_vector_math(tmp_path, monkeypatch):
    """The epilogue over a block's columns is a SIMD loop: tanh after a linear calls libmvec's vector tanh."""
    path = tmp_path / "p.py"
    path.write_text(LINEAR.replace("(13, 300)", "(40, 300)"))  # past the few-rows template
    text = render(build(path, "cpp", "cpu", tuned=False))
    assert re.search(r"#pragma omp simd\n\s*for \(int64_t akg_j = 0; akg_j < akg_nw", text), text
    mod, syms = _load_with_symbols(text, tmp_path, monkeypatch)
    assert re.search(r"_ZGV\w*tanhf", syms), syms
    m = mod.ModelNew()
    x = torch.randn(40, 300)
    torch.testing.assert_close(m(x), torch.tanh(F.linear(x * 0.5, m.fc.weight, m.fc.bias)), rtol=1e-5, atol=1e-5)


def test_vector_math_takes_512_bit_loops_on_avx512_hosts(tmp_path, monkeypatch):
    """gcc vectorises for 256-bit registers on an AVX-512 host unless told: a kernel that calls vector math
    is marked AKG_WIDE by default there (libmvec's 16-wide functions: twice the throughput of the 8-wide
    ones), one without keeps 256 bits; the tuning space has the other width; hosts of 8-float vectors
    have no knob. Verified either way."""
    from dsl_backends.cpp.backend import TEMPLATES

    class Lanes:  # the host's target with another vector width
        def __init__(self, target, n):
            self.target, self.n = target, n

        def chip(self, key):
            return self.n if key == "simd_width" else self.target.chip(key)

        def __getattr__(self, name):
            return getattr(self.target, name)

    path = tmp_path / "p.py"
    path.write_text(LINEAR.replace("(13, 300)", "(40, 300)"))
    t = build(path, "cpp", "cpu", tuned=False)
    k = next(k for k in t.program.kernels() if k.kind == "matmul")  # tanh in its epilogue
    for lanes in (16, 8):
        target = Lanes(t.target, lanes)
        assert TEMPLATES[k.kind].default(k, target).get("wide") == (1 if lanes == 16 else None)
        assert {s.get("wide") for s in TEMPLATES[k.kind].space(k, target)} == ({1, 0} if lanes == 16 else {None})
    t.schedules = {n: s.replace(wide=1) if n == k.name else s for n, s in t.schedules.items()}
    text = render(t)
    assert 'extern "C" AKG_WIDE ' in text and "prefer-vector-width=512" in text
    mod, syms = _load_with_symbols(text, tmp_path, monkeypatch)
    if " avx512f" in mod._akg_cpu():
        assert re.search(r"_ZGVeN16v_tanhf", syms), syms
    m = mod.ModelNew()
    x = torch.randn(40, 300)
    torch.testing.assert_close(m(x), torch.tanh(F.linear(x * 0.5, m.fc.weight, m.fc.bias)), rtol=1e-5, atol=1e-5)
    # no vector math: 256-bit loops by default
    path.write_text(LINEAR.replace("(13, 300)", "(40, 300)").replace("torch.tanh(", "torch.relu("))
    t = build(path, "cpp", "cpu")
    assert "AKG_WIDE void" not in render(t) and all("wide" not in s for s in t.schedules.values())


SMALL_BATCH = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4200, 40)

    def forward(self, x, w):
        return torch.relu(self.fc(x)) + x @ w  # an [N, K] weight and a [K, N] operand


def get_inputs():
    return [torch.randn(ROWS, 4200), torch.randn(4200, 40)]


def get_init_inputs():
    return []
'''


@pytest.mark.parametrize("rows", [1, 3, 8, 9])
def test_gemms_with_few_rows_stream_the_weights(rows, tmp_path):
    """Batch 1-8 through a linear layer: no packing, one pass over B for a group of columns and every row
    (9 rows take the blocked template), fp32 partial sums per chunk of KC (K = 4200: a full chunk of 4096
    and a short one) added in double; both B layouts, the epilogue fused, verified against the reference.
    One row streams 8 columns of B side by side (8 accumulators; 4 on a host of 16 vector registers)."""
    path = tmp_path / "p.py"
    path.write_text(SMALL_BATCH.replace("ROWS", str(rows)))
    t = build(path, "cpp", "cpu", tuned=False)
    text = render(t)
    small = "akg_bp" not in text and "reduction(+: akg_part0_0" in text and "akg_acc0_0 += (double)akg_part0_0" in text
    assert small == (rows <= 8) and ("akg_kb += 4096" in text) == small
    if rows == 1:  # 8 accumulators beside A's and B's vectors where the host has 32 registers, 4 in 16
        nc = 8 if 8 + 8 + 1 <= t.target.fig("chip", "vector_registers").value else 4
        assert all(s["NC"] in (8, nc) for s in t.schedules.values() if "NC" in s)
        assert f"(akg_cg * {nc} + {nc - 1})" in text
    cand = tmp_path / "cand.py"
    cand.write_text(text)
    v = verify(path, cand, target="cpu", seeds=(0, 1))
    assert v.accepted, v.line()


@pytest.mark.parametrize("nc,kc", [(1, 512), (2, 4096), (2, 512)])
def test_few_rows_group_widths_and_chunks_of_the_space(nc, kc, tmp_path):
    """Schedules of the tuner's space for few rows, each forced and verified: a group of NC columns,
    chunks of KC (512: eight full chunks and a short one); the [K, N] operand's groups are whole vectors
    (8 columns here: 40 has no wider multiple of 8 that leaves two groups a thread)."""
    path = tmp_path / "p.py"
    path.write_text(SMALL_BATCH.replace("ROWS", "3"))
    t = build(path, "cpp", "cpu")
    backend = get_backend("cpp")
    forced = {}
    for k in t.program.kernels():
        space = backend.tuning_space(k, t.target)
        assert space[0] == backend.default_schedule(k, t.target)
        want = 8 if along_n(k) else nc
        [forced[k.name]] = [s for s in space if s.get("NC") == want and s.get("KC") == kc
                            and "threads" not in s and "wide" not in s]
    assert sorted(along_n(k) for k in t.program.kernels()) == [False, True]
    text = render(replace(t, schedules={**t.schedules, **forced}))
    assert f"akg_kb += {kc})" in text and (f"(akg_cg * {nc} + {nc - 1})" in text or nc == 1)
    assert "akg_part[3][8]" in text
    cand = tmp_path / "cand.py"
    cand.write_text(text)
    v = verify(path, cand, target="cpu", seeds=(0, 1))
    assert v.accepted, v.line()


def _verified_module(problem, text, tmp_path, name):
    """The rendered module verified against `problem` on the CPU, then loaded for direct calls."""
    import importlib.util

    cand = tmp_path / "cand.py"
    cand.write_text(text)
    assert verify(problem, cand, target="cpu", seeds=(0, 1)).accepted
    spec = importlib.util.spec_from_file_location(name, cand)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


STRIDED = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x.sum(dim=1) * 0.5, x.amax(dim=1) + 1.0, x.prod(dim=1)


def get_inputs():
    return [torch.randn(6, 30, 3000) * 0.1 + 1.0]


def get_init_inputs():
    return []
'''


def test_reductions_over_a_middle_axis_vectorise_along_the_contiguous_outputs(tmp_path):
    """A sum, a max (NaN propagating) and a product over a non-contiguous axis: the reduction loop
    outside, the contiguous outputs inside a SIMD loop (accumulators on the heap past 2048 outputs);
    verified, a NaN included."""
    from dsl_backends.cpp.backend import _strided_ok

    path = tmp_path / "p.py"
    path.write_text(STRIDED)
    t = build(path, "cpp", "cpu")
    assert [_strided_ok(k) is not None for k in t.program.kernels()] == [True, True, True]
    text = render(t)
    assert text.count("#pragma omp simd\n            for (int64_t akg_c = 0; akg_c < 3000;") == 3
    assert "std::vector<double> akg_acc0_v(3000" in text
    mod = _verified_module(path, text, tmp_path, "strided_mod")
    x = torch.randn(6, 30, 3000) * 0.1 + 1.0
    x[2, 7, 11] = float("nan")
    got = mod.ModelNew()(x)
    assert torch.isnan(got[0][2, 11]) and torch.isnan(got[1][2, 11]) and torch.isnan(got[2][2, 11])
    assert not torch.isnan(got[1][2, 12]) and torch.allclose(got[1][3], x.amax(dim=1)[3] + 1.0)


PER_CHANNEL = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, v):
        return x * torch.rsqrt(v + 1e-5)[None, :, None] + 1.0


def get_inputs():
    return [torch.randn(4, 8, 64), torch.rand(8) + 0.5]


def get_init_inputs():
    return []
'''


def test_a_pointwise_row_loop_computes_row_values_once_per_row(tmp_path):
    """Rows in parallel, a SIMD loop along the last dimension; a per-channel rsqrt is computed in the
    row loop, before the column loop."""
    path = tmp_path / "p.py"
    path.write_text(PER_CHANNEL)
    text = render(build(path, "cpp", "cpu"))
    kernel = text.split('extern "C" void')[1]
    assert kernel.index("sqrt") < kernel.index("#pragma omp simd") and "x[(akg_o * 64 + akg_c)]" in kernel
    cand = tmp_path / "cand.py"
    cand.write_text(text)
    assert verify(path, cand, target="cpu", seeds=(0, 1)).accepted


SOFTMAX_ROWS = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.softmax(x * 0.5, dim=-1), x.amax(dim=-1)


def get_inputs():
    return [torch.randn(64, 300)]


def get_init_inputs():
    return []
'''


def test_a_row_softmax_computes_each_exponential_once_and_its_max_as_a_simd_reduction(tmp_path):
    """The row sum's loop writes exp(x - max) to the output and a second loop divides in place (one
    exponential per element, not two); the row maximum is an OpenMP max reduction with NaN noted apart.
    Bitwise the same as the two-pass form; a NaN row and an all -inf row behave as torch's."""
    path = tmp_path / "p.py"
    path.write_text(SOFTMAX_ROWS)
    t = build(path, "cpp", "cpu", pure=True)
    text = render(t)
    soft = next(k for k in t.program.kernels() if "softmax" in k.name)
    src = text[text.index(f'void {soft.name}('):]
    src = src[:src.index("\n}\n")]
    assert src.count("expf(") == 1 and "/ ((float)" in src
    assert text.count("#pragma omp simd reduction(max:") == 2 and "_nan |=" in text
    mod = _verified_module(path, text, tmp_path, "softmax_mod")
    x = torch.randn(64, 300)
    x[3, 17] = float("nan")
    x[5] = float("-inf")
    got, mx = mod.ModelNew()(x)
    want, wmx = torch.softmax(x * 0.5, dim=-1), x.amax(dim=-1)
    assert torch.equal(torch.isnan(got), torch.isnan(want)) and torch.equal(torch.isnan(mx), torch.isnan(wmx))
    ok = ~torch.isnan(want)
    assert torch.allclose(got[ok], want[ok], atol=1e-6) and torch.equal(mx[~torch.isnan(wmx)], wmx[~torch.isnan(wmx)])


def test_a_row_kernels_values_of_the_row_alone_are_computed_before_its_column_loop(tmp_path):
    """log_softmax's log(sum) depends on the row alone: computed once per row, before the column loop
    (inside it, a math call that may set errno stays per column); verified."""
    path = tmp_path / "p.py"
    path.write_text(SOFTMAX_ROWS.replace("torch.softmax(x * 0.5, dim=-1)", "torch.log_softmax(x, dim=-1)"))
    t = build(path, "cpp", "cpu", pure=True)
    text = render(t)
    k = next(k for k in t.program.kernels() if "log_softmax" in k.name)
    src = text[text.index(f"void {k.name}("):]
    src = src[:src.index("\n}\n")]
    assert src.count("logf(") == 1 and src.index("logf(") < src.index("for (int64_t akg_col")
    _verified_module(path, text, tmp_path, "log_softmax_mod")


STREAMED = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln = nn.LayerNorm(72)

    def forward(self, v, x, y):
        return torch.sigmoid(v) * 2.0, F.gelu(x) + 1.0, self.ln(y), torch.softmax(x, dim=-1)


def get_inputs():
    return [torch.randn(1003), torch.randn(12, 100), torch.randn(5, 72)]


def get_init_inputs():
    return []
'''


def test_streamed_stores_write_every_element_whatever_the_alignment(tmp_path):
    """With `stream` every pointwise and row kernel computes blocks into an aligned buffer and writes
    them with non-temporal stores, fenced before its parallel region ends: a flat loop with a tail
    (1003 elements), rows of 100 (every other row's start not 32-byte aligned: plain stores there),
    a layer norm's rows; a softmax's rows, whose terms are kept in the output's row, stay plain. The
    verifier's poisoned outputs catch any element left unwritten."""
    from dsl_backends.cpp.stream import streamable

    path = tmp_path / "p.py"
    path.write_text(STREAMED)
    t = build(path, "cpp", "cpu", pure=True)
    kinds = {k.kind for k in t.program.kernels() if streamable(k)}
    assert kinds == {"pointwise", "rownorm"}, [k.kind for k in t.program.kernels()]
    for k in t.program.kernels():
        if streamable(k):
            t.schedules[k.name] = t.schedules[k.name].replace(stream=True)
    text = render(t)
    for k in t.program.kernels():
        src = text[text.index(f"void {k.name}("):]
        src = src[:src.index("\n}\n")]
        assert ("akg_stream(out" in src and "akg_sfence();" in src) == streamable(k), src
    assert "akg_stream(out + akg_o * 100 + akg_cb" in text  # the rows-then-columns loop streams too
    # the softmax keeps its terms in its output's row and stores in place: not streamable, never streamed
    assert "float* akg_t = out + akg_row * 100;" in text and "akg_row_scratch(100)" not in text
    cand = tmp_path / "cand.py"
    cand.write_text(text)
    v = verify(path, cand, target="cpu", seeds=(0, 1))
    assert v.accepted, v.line()


def test_outputs_past_half_the_last_level_cache_are_streamed_by_default_where_such_stores_pay(monkeypatch):
    from dataclasses import replace

    from dsl_backends.cpp.backend import TEMPLATES
    from dsl_backends.cpp.stream import stream_default
    from hardware_models import spec
    from ir.kernel.ir import Buf, Const, Kernel, Var

    cpu = spec.detect_cpu()

    def with_llc(n: int, pays: int = 1):
        chip = cpu.figures["chip"]
        return replace(cpu, figures={**cpu.figures, "chip": {
            **chip, "l2_bytes": replace(chip["l2_bytes"], value=n), "stream_stores": replace(chip["stream_stores"],
                                                                                             value=pays)}})

    def k(numel: int, dtype: str = "f32", kind: str = "pointwise") -> Kernel:
        return Kernel("k", kind, Buf("o", (numel,), dtype), (Var("c", numel),), Const(1.0, dtype))

    llc = with_llc(32 << 20)
    assert stream_default(k(4 << 20), llc).get("stream") is True  # 16 MiB of f32
    assert stream_default(k(1 << 20), llc).get("stream") is None  # 4 MiB: its reader finds it cached
    assert stream_default(k(4 << 20, "f64"), llc).get("stream") is None
    assert stream_default(k(4 << 20, kind="reduce"), llc).get("stream") is None
    plain = with_llc(32 << 20, pays=0)  # a host where they lose: plain stores, the streamed ones in the space
    assert stream_default(k(4 << 20), plain).get("stream") is None
    assert {s.get("stream") for s in TEMPLATES["pointwise"].space(k(4 << 20), plain)} == {None, True}
    for vendor, pays in (("GenuineIntel", 0), ("AuthenticAMD", 1)):  # measured on the project's two hosts
        monkeypatch.setattr(spec, "_read", lambda path, v=vendor: f"vendor_id\t: {v}\nflags\t: avx2 fma\n"
                            if "cpuinfo" in path else "")
        assert spec.detect_cpu().chip("stream_stores") == pays


def test_a_compiled_library_is_keyed_by_the_cpus_extensions_not_only_its_name(tmp_path):
    """-march=native code built on a host with AMX or AVX-512 BF16 dies of an illegal instruction on a host
    without them; cloud VMs of both kinds share one model name, so the build cache's key holds the flags."""
    path = tmp_path / "p.py"
    path.write_text(BMM)
    text = render(build(path, "cpp", "cpu"))
    start = text.index("def _akg_cpu():")
    scope: dict = {"_platform": __import__("platform")}
    exec(text[start:text.index("\n\n\n", start)], scope)
    key = scope["_akg_cpu"]()
    flags = next(ln for ln in open("/proc/cpuinfo") if ln.startswith(("flags", "Features")))
    assert flags in key and key.count(flags) == 1
