"""Chains (`dsl_backends.chain`): a run of consecutive C++ kernels is one call of one `extern "C"` function,
the buffers no later step reads placed in one scratch block at offsets reused as they die. A recurrent loop
unrolled into small kernels is the case: its steps cost Python a call, an allocation and a pointer each."""

from __future__ import annotations

import ctypes
import re
import sysconfig

import torch

from dsl_backends.chain import SCRATCH_ALIGN, plan_chains
from dsl_backends.cpp.chain import can_chain
from ir.types import DTYPES

from .helpers import assert_source_verifies, import_written, problem_namespace, translated_cpp

RNN = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(16, 32) * 0.3)
        self.u = nn.Parameter(torch.randn(32, 32) * 0.3)
        self.k = nn.Parameter(torch.randn(8, 6, 3) * 0.3)

    def forward(self, x):
        h = torch.zeros(4, 32)
        outs = []
        for t in range(6):
            h = torch.tanh(x[:, t] @ self.w + h @ self.u)
            outs.append(h)
        # a library call reads the chain's stacked steps; the last step is returned as well
        return torch.relu(F.conv1d(torch.stack(outs, 1), self.k)).sum(-1) * 2.0, h


def get_inputs():
    return [torch.randn(4, 6, 16)]


def get_init_inputs():
    return []
'''


def _translated(tmp_path, monkeypatch):
    return translated_cpp(tmp_path, monkeypatch, RNN, "rnn")


def test_a_recurrent_loop_runs_as_one_chain_and_matches_torch(tmp_path, monkeypatch):
    path, t, src = _translated(tmp_path, monkeypatch)
    forward = src[src.index("    def forward"):]
    calls = re.findall(r"_AKG_LIB\.(akg_chain_\w+)\(.*\)  # (\d+) kernels", forward)
    assert len(calls) == 1 and int(calls[0][1]) >= 12  # six steps of at least two kernels each
    # what outlives the chain is allocated by forward: the last step (returned) and the stack the conv reads
    before = forward[:forward.index(calls[0][0])]
    assert before.count("torch.empty(") == 2 and "F.conv1d(" in forward[forward.index(calls[0][0]):]
    ns = problem_namespace(RNN)
    torch.manual_seed(0)
    model, x = ns["Model"](), ns["get_inputs"]()[0]
    mod = import_written(tmp_path, src, "rnn_m")
    new = mod.ModelNew()
    new.load_state_dict(model.state_dict())
    for _ in range(2):  # the scratch block is reused by the second call
        for got, want in zip(new(x), model(x)):
            torch.testing.assert_close(got, want)
    # without Python's headers the same chain is called through ctypes
    paths = sysconfig.get_paths()
    monkeypatch.setattr(sysconfig, "get_paths", lambda *a, **k: {**paths, "include": str(tmp_path / "none")})
    plain = import_written(tmp_path, src, "rnn_ctypes")
    assert isinstance(plain._AKG_LIB, ctypes.CDLL)
    old = plain.ModelNew()
    old.load_state_dict(model.state_dict())
    for got, want in zip(old(x), model(x)):
        torch.testing.assert_close(got, want)
    assert_source_verifies(path, src, tmp_path)


def test_scratch_buffers_live_at_once_never_share_bytes_and_dead_ones_are_reused(tmp_path, monkeypatch):
    _, t, _ = _translated(tmp_path, monkeypatch)
    (chain,) = plan_chains(t.program, can_chain)
    kernels = chain.kernels(t.program)
    at = {b.name: (off, off + b.numel * DTYPES[b.dtype].itemsize) for b, off in chain.scratch}
    assert all(off % SCRATCH_ALIGN == 0 for off, _ in at.values())
    assert len(chain.outputs) == 2  # the last step and the stack
    last = {name: i for i, k in enumerate(kernels) for name in (b.name for b in k.inputs()) if name in at}
    made = {b.name: i for i, k in enumerate(kernels) for b in k.outs()}
    for i, k in enumerate(kernels):
        # live while kernel i runs: written at or before i, read at or after i
        live = [at[n] for n in at if made[n] <= i and max(last.get(n, made[n]), made[n]) >= i]
        live.sort()
        assert all(a[1] <= b[0] for a, b in zip(live, live[1:])), f"overlap at {k.name}: {live}"
    total = sum(end - off for off, end in at.values())
    assert chain.scratch_bytes < total  # the steps' dead buffers were reused
    # every buffer read inside the chain is the chain's input, its own output or a scratch buffer
    inside = {b.name for b in (*chain.inputs, *chain.outputs)} | set(at)
    assert all(b.name in inside for k in kernels for b in (*k.inputs(), *k.outs()))


def test_kernels_a_chain_cannot_call_break_it(tmp_path, monkeypatch):
    _, t, _ = _translated(tmp_path, monkeypatch)
    # nothing chains: no chain, and the written module calls each kernel itself
    assert plan_chains(t.program, lambda k: False) == []
    # every other kernel refused: runs too short to chain
    names = [k.name for k in t.program.kernels()]
    assert plan_chains(t.program, lambda k: names.index(k.name) % 2 == 0) == []
    # a run cut in two by a kernel refused
    middle = names[5]
    parts = plan_chains(t.program, lambda k: k.name != middle)
    assert [c.stop - c.start for c in parts][:2] == [5, 8]
    first, second = parts[:2]
    assert middle not in {k.name for c in parts for k in c.kernels(t.program)}
    # what the first part writes and the refused kernel reads leaves the chain as an output
    reads = {b.name for k in t.program.kernels() if k.name == middle for b in k.inputs()}
    assert reads & {b.name for b in first.outputs} and not reads & {b.name for b, _ in first.scratch}
    assert second.start == first.stop + 1
