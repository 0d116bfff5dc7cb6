"""A Triton candidate's kernels compiled in parallel before its first trial (`dsl_backends/triton/precompile.py`,
named by the manifest and called by the verifier's worker): which
modules qualify (CPU), and on the GPU that the children's compiles are the ones the launches then find."""

from __future__ import annotations

import importlib.util
import sys

import pytest
import torch

from dsl_backends.triton.precompile import _kernels, compile_all, precompile, record

KERNELS = '''
import torch
import triton
import triton.language as tl


@triton.jit
def scale(x, y, n, a: tl.constexpr, B: tl.constexpr):
    i = tl.program_id(0) * B + tl.arange(0, B)
    tl.store(y + i, tl.load(x + i, mask=i < n) * a, mask=i < n)


@triton.jit
def argmax_rows(x, out, n, B: tl.constexpr):
    r = tl.program_id(0)
    v = tl.load(x + r * n + tl.arange(0, B), mask=tl.arange(0, B) < n, other=-float("inf"))
    tl.store(out + r, tl.argmax(v, 0))
{extra}

class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("calls", torch.zeros(1))

    def forward(self, x):
        self.calls += 1  # a library call that updates a buffer: restored after the recording pass
        ys = []
        b = 128 if x.shape[0] > 4 else 64  # a schedule per size, as a --dynamic module's buckets have
        for a in (1.0, 2.0, 3.0, 4.0):  # four specializations of one kernel, the first twice
            y = torch.empty_like(x)
            scale[(triton.cdiv(x.numel(), b),)](x, y, x.numel(), a, b)
            ys.append(y)
        y = torch.empty_like(x)
        scale[(triton.cdiv(x.numel(), 128),)](x, y, x.numel(), 1.0, 128)
        idx = torch.empty(x.shape[0], dtype=torch.int64, device=x.device)
        argmax_rows[(x.shape[0],)](x, idx, x.shape[1], 64)
        return torch.stack(ys).sum(0) + x.gather(1, idx[:, None])  # the indices feed a library gather
'''

AUTOTUNED = '''

@triton.autotune(configs=[triton.Config({}, num_warps=4)], key=["n"])
@triton.jit
def tuned(x, n):
    pass
'''


def _load(tmp_path, name, extra=""):
    path = tmp_path / f"{name}.py"
    path.write_text(KERNELS.replace("{extra}", extra))
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def test_only_plain_triton_kernels_qualify(tmp_path, monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)  # the interpreter's kernels are not compiled
    assert _kernels(_load(tmp_path, "plain_kernels")) is not None
    assert _kernels(_load(tmp_path, "tuned_kernels", AUTOTUNED)) is None  # its tuner would time skipped launches
    assert _kernels(torch) is None  # no kernel at all


@pytest.mark.gpu
def test_the_launches_find_what_the_children_compiled(tmp_path, monkeypatch):
    from triton.compiler import compiler

    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton"))
    mod = _load(tmp_path, "gpu_kernels")
    cand = mod.ModelNew().cuda()
    x = torch.randn(8, 40, device="cuda")
    specs = record(mod, cand, [x.clone()])
    assert len(specs) == 5  # scale at four constants, argmax_rows once; nothing launched
    assert cand.calls.item() == 0  # the buffer the pass's forward updated, restored
    assert compile_all(specs, workers=3) == {"kernels": 5, "processes": 3, "failed_processes": 0}
    made = []
    make_ir = compiler.ASTSource.make_ir
    monkeypatch.setattr(compiler.ASTSource, "make_ir", lambda self, *a, **k: made.append(self.name)
                        or make_ir(self, *a, **k))
    with torch.no_grad():
        got = cand(x)
    want = x * 10 + x.gather(1, x.argmax(1, keepdim=True))
    torch.testing.assert_close(got, want)
    assert made == [], made  # every kernel came from the children's compiles


def test_the_worker_finds_the_hook_through_the_manifest(tmp_path, monkeypatch):
    from akg_agent.verifier.worker import _precompiled
    from dsl_backends import precompilers

    assert ("triton", "dsl_backends.triton.precompile:precompile") in precompilers()
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    mod = _load(tmp_path, "few_kernels")
    calls = []
    monkeypatch.setattr("dsl_backends.triton.precompile._recorded", lambda m, c, xs: calls.append(xs) or {})
    assert _precompiled(mod, mod.ModelNew(), [lambda: ["inputs"]]) == {
        "precompile": {"triton": {"kernels": 0, "processes": 0, "failed_processes": 0}}}
    assert calls == [["inputs"]]
    calls.clear()  # a --dynamic module: every size its trials run is recorded (its buckets' kernels)
    _precompiled(mod, mod.ModelNew(), [lambda: ["seed"], lambda: ["size 3"], lambda: ["size 17"]])
    assert calls == [["seed"], ["size 3"], ["size 17"]]
    assert _precompiled(torch, None, lambda: []) == {}  # no kernel of any DSL: nothing recorded


@pytest.mark.gpu
def test_every_size_the_trials_run_is_compiled_before_them(tmp_path, monkeypatch):
    """A module whose kernels' schedules depend on the size (a --dynamic module's buckets): each size the
    trials run is recorded, so no launch at either size compiles."""
    from triton.compiler import compiler

    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton"))
    mod = _load(tmp_path, "sized_kernels")
    cand = mod.ModelNew().cuda()
    xs = [torch.randn(8, 40, device="cuda"), torch.randn(3, 40, device="cuda")]
    one = len(record(mod, cand, [xs[0].clone()]))
    got = precompile(mod, cand, [lambda x=x: [x.clone()] for x in xs])
    assert got is not None and got["kernels"] > one and got["failed_processes"] == 0  # scale's other block
    made = []
    make_ir = compiler.ASTSource.make_ir
    monkeypatch.setattr(compiler.ASTSource, "make_ir", lambda self, *a, **k: made.append(self.name)
                        or make_ir(self, *a, **k))
    with torch.no_grad():
        for x in xs:
            torch.testing.assert_close(cand(x), x * 10 + x.gather(1, x.argmax(1, keepdim=True)))
    assert made == [], made
