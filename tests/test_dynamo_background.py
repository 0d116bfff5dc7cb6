"""torch.compile(backend="akg") with first_call="eager": calls run as torch while a background process
writes and verifies the module, which takes over once its entry is complete (`dynamo_background`)."""

from __future__ import annotations

import time
import warnings
from concurrent.futures import Future
from pathlib import Path

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import akg_agent
from akg_agent import dynamo_background
from akg_agent.dynamo import Options
from ir.errors import AkgError


class Block(nn.Module):
    def __init__(self, d: int = 32, p: float = 0.0):
        super().__init__()
        self.a, self.b, self.n = nn.Linear(d, 2 * d), nn.Linear(2 * d, d), nn.LayerNorm(d)
        self.p = p

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.n(x + F.dropout(self.b(F.gelu(self.a(x))), self.p, self.training))


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()  # a Block seen at another size would come back with symbolic sizes


def _compiled(model: nn.Module, tmp_path: Path) -> nn.Module:
    return akg_agent.compile(model, dsl="cpp", target="cpu", cache_dir=str(tmp_path), seeds=(0,),
                             first_call="eager")


def test_calls_run_as_torch_until_the_module_is_written_then_the_module(tmp_path):
    torch.manual_seed(0)
    model, x = Block().eval(), torch.randn(4, 8, 32)
    c = _compiled(model, tmp_path)
    with torch.no_grad():
        want = model(x)
        t0 = time.perf_counter()
        first = c(x)
        first_s = time.perf_counter() - t0
        rep = c.akg_report.graphs[0]
        assert (rep.translations, rep.eager_calls) == (0, 1)  # not written yet: the graph ran as torch
        torch.testing.assert_close(first, want, rtol=0, atol=0)
        assert c.akg_report.wait(timeout=600)
        assert c.akg_report.pending and all(f.done() for f in c.akg_report.pending)
        assert (tmp_path.glob("*/module.py")).__next__().is_file()
        got = c(x)
        got2 = c(x)
    # the module took over at the first call after it was written: no further call ran as torch
    assert (rep.translations, rep.cache_hits, rep.eager_calls) == (1, 0, 1), rep.line()
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(got2, got, rtol=0, atol=0)
    assert "1 call(s) as torch while writing in the background" in rep.line()
    assert first_s < 30  # the first call did not wait for the module (which takes its own seconds)


def test_training_steps_run_as_torch_then_the_written_forward_and_backward(tmp_path):
    torch.manual_seed(0)
    model, x = Block(p=0.1).train(), torch.randn(4, 8, 32)
    ref = Block(p=0.1).train()
    ref.load_state_dict(model.state_dict())
    c = _compiled(model, tmp_path)

    def step(m: nn.Module, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
        m.zero_grad()
        torch.manual_seed(seed)
        y = m(x)
        y.square().mean().backward()
        return y.detach(), m.a.weight.grad.clone()

    y, g = step(c, 1)
    y_ref, g_ref = step(ref, 1)
    # as torch (AOTAutograd's decomposed graph: its layer norm rounds apart from eager's): the dropout drew
    # eager's mask (the background process has generators of its own); another mask would differ by O(1)
    torch.testing.assert_close(y, y_ref, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(g, g_ref, rtol=1e-6, atol=1e-7)
    assert c.akg_report.wait(timeout=900)
    for seed in (2, 3):  # the forward's module at the first step after, the backward's at the next
        y, g = step(c, seed)
        y_ref, g_ref = step(ref, seed)
        torch.testing.assert_close(y, y_ref, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(g, g_ref, rtol=1e-4, atol=1e-5)
    assert c.akg_report.wait(timeout=900)
    y, g = step(c, 4)
    y_ref, g_ref = step(ref, 4)
    torch.testing.assert_close(g, g_ref, rtol=1e-4, atol=1e-5)
    reps = {r.name.split(".")[-1]: r for r in c.akg_report.graphs}
    assert set(reps) == {"forward", "backward"}
    assert all(r.translations == 1 and r.torch_sizes == 0 for r in reps.values()), c.akg_report.summary()


class _Failing:
    """A translator whose every job comes back without a module."""

    def submit(self, job: dict) -> Future:
        done: Future = Future()
        done.set_result(("the verifier rejected it: 3 of 128 values off", []))
        return done

    def prestart(self, target: str, dsl: str) -> None:
        pass


def test_a_module_the_background_could_not_write_leaves_the_graph_torch_with_its_cause(tmp_path, monkeypatch):
    monkeypatch.setattr(dynamo_background, "translator", lambda: _Failing())
    model, x = Block().eval(), torch.randn(2, 32)
    c = _compiled(model, tmp_path)
    with torch.no_grad(), warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        for _ in range(3):
            torch.testing.assert_close(c(x), model(x), rtol=0, atol=0)
    rep = c.akg_report.graphs[0]
    assert (rep.translations, rep.torch_sizes, rep.eager_calls) == (0, 1, 1)
    assert any("3 of 128 values off" in str(w.message) for w in seen)


def _missing(tmp_path: Path, name: str) -> dict:
    return {"problem": str(tmp_path / name / "graph.py"), "entry": str(tmp_path / name / "entry"), "dsl": "cpp",
            "target": "cpu", "how": {"seeds": [0]}}


def test_the_translator_answers_a_job_it_cannot_do_and_goes_on(tmp_path):
    pool = dynamo_background.translator()
    error, notes = pool.submit(_missing(tmp_path, "a")).result(timeout=300)
    assert "graph.py" in error and notes == []
    first = [m.proc.pid for m in pool.members]
    error2, _ = pool.submit(_missing(tmp_path, "b")).result(timeout=300)  # the same process answers again
    assert "graph.py" in error2 and [m.proc.pid for m in pool.members] == first


def test_a_translator_that_died_answers_its_jobs_and_another_takes_the_next(tmp_path):
    """The translator in a raw Translator answers its pending jobs when it dies; a pool starts another for the
    next job rather than handing it to the dead one."""
    pool = dynamo_background.translator()
    pool.submit(_missing(tmp_path, "a")).result(timeout=300)
    dead = pool.members[0]
    dead.close()  # killed, as by the OOM killer
    error, _ = dead.submit(_missing(tmp_path, "b")).result(timeout=60)  # an answer, not an exception
    assert "translator exited" in error and "its log" in error
    error, _ = pool.submit(_missing(tmp_path, "c")).result(timeout=300)
    assert "graph.py" in error  # a live translator's answer
    assert dead not in pool.members and all(m.proc.poll() is None for m in pool.members)


class _Busy:
    """A translator whose jobs never end."""

    def __init__(self) -> None:
        self.jobs: dict = {}

    def submit(self, job: dict) -> Future:
        self.jobs[len(self.jobs)] = f = Future()
        return f


class _Running:
    poll = staticmethod(lambda: None)


class _FakeTranslator(_Busy):
    def __init__(self, log: Path) -> None:
        super().__init__()
        self.proc = _Running()

    def close(self) -> None:
        pass


def test_a_pool_starts_a_second_translator_while_the_first_is_busy(monkeypatch, tmp_path):
    monkeypatch.setattr(dynamo_background, "Translator", _FakeTranslator)
    pool = dynamo_background.Pool(2)
    for name in "abc":
        pool.submit(_missing(tmp_path, name))
    assert [len(m.jobs) for m in pool.members] == [2, 1]  # the third to the less busy of two, no third process


def test_a_pool_writes_one_entry_once_and_sizes_itself_by_cores(monkeypatch, tmp_path):
    pool = dynamo_background.Pool(2)
    busy = _Busy()
    monkeypatch.setattr(pool, "_member", lambda: busy)
    a = pool.submit(_missing(tmp_path, "a"))
    assert pool.submit(_missing(tmp_path, "a")) is a  # a second graph of the same code and sizes
    assert pool.submit(_missing(tmp_path, "b")) is not a and len(busy.jobs) == 2
    for cores, size in ((2, 1), (8, 2), (16, 4), (128, 4)):
        monkeypatch.setattr(dynamo_background.os, "sched_getaffinity", lambda _, n=cores: set(range(n)))
        assert dynamo_background.pool_size() == size


def test_first_call_takes_wait_or_eager():
    assert Options.of({"first_call": "eager"}).first_call == "eager"
    assert Options().first_call == "wait"
    with pytest.raises(AkgError, match="first_call='soon'.*'wait' or 'eager'"):
        Options.of({"first_call": "soon"})


@pytest.mark.gpu
def test_on_a_gpu_the_translator_verifies_beside_a_caller_that_holds_cuda(tmp_path):
    """The caller's process has CUDA initialised (its eager calls ran there); the translator, a process of
    its own, verifies the Triton module on the same GPU, which then replays as a CUDA graph."""
    torch.manual_seed(0)
    model, x = Block().eval().cuda(), torch.randn(4, 8, 32, device="cuda")
    c = akg_agent.compile(model, cache_dir=str(tmp_path), seeds=(0,), first_call="eager")
    with torch.no_grad():
        want = model(x)
        torch.testing.assert_close(c(x), want, rtol=0, atol=0)
        assert c.akg_report.wait(timeout=600)
        got = c(x)
        c(x)
    rep = c.akg_report.graphs[0]
    assert (rep.dsl, rep.translations, rep.eager_calls, rep.torch_sizes) == ("triton", 1, 1, 0), rep.line()
    assert rep.replayed == 1, rep.line()
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
