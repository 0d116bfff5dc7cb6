"""CUDA-graph replay of written modules (`akg_agent.cuda_graphs`): which graphs may be replayed (CPU), and on
a GPU that a replay keeps a plain call's meaning: new inputs, parameters changed in place, returned tensors
never overwritten, and a call whose launches read host state dropped back to plain calls."""

from __future__ import annotations

import copy
import gc

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import akg_agent
from akg_agent.cuda_graphs import Replayed, _own, ineligible, static_inputs
from akg_agent.dynamo import Options
from ir.errors import AkgError


class Block(nn.Module):
    def __init__(self, d: int = 32):
        super().__init__()
        self.a, self.b, self.n = nn.Linear(d, 2 * d), nn.Linear(2 * d, d), nn.LayerNorm(d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.n(x + self.b(F.dropout(F.gelu(self.a(x)), 0.1, self.training)))


class Bumps(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x.add_(1.0)  # writes its input: a replay would write the graph's copy instead
        return x * 2


class Cache(nn.Module):
    """Writes a slot of its buffer (a KV cache's update) and reads the whole buffer back."""

    def __init__(self):
        super().__init__()
        self.register_buffer("kv", torch.zeros(4, 8))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.kv[1] = x
        return self.kv.sum(0) * 2


class Noisy(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + torch.randn_like(x)


def _graph(model: nn.Module, x: torch.Tensor) -> tuple[torch.fx.GraphModule, list]:
    got: list = []

    def backend(gm, example_inputs):
        got.append((gm, example_inputs))
        return gm.forward
    torch._dynamo.reset()
    torch.compile(model, backend=backend)(x)
    return got[0]


def test_which_graphs_may_be_replayed():
    with torch.no_grad():
        gm, args = _graph(Block().eval(), torch.randn(4, 32))
        assert ineligible(gm) == ""  # evaluation-mode dropout draws nothing
        assert static_inputs(gm, args).count(False) == 1  # x; the weights are read in place
        assert "writes in place (add_)" in ineligible(_graph(Bumps(), torch.randn(4))[0])
        assert "draws random numbers (randn_like)" in ineligible(_graph(Noisy(), torch.randn(4))[0])
        assert "draws random numbers (dropout)" in ineligible(_graph(Block().train(), torch.randn(4, 32))[0])


def test_cuda_graphs_option_is_checked():
    assert Options.of({}).cuda_graphs == "auto"
    with pytest.raises(AkgError, match="cuda_graphs='always': choose 'auto' or 'off'"):
        Options.of({"cuda_graphs": "always"})


def test_a_graphs_own_input_buffer_keeps_the_inputs_strides():
    """A backward graph's incoming gradient of a sum is an expanded scalar (zero strides): its buffer keeps
    that layout, the one the module was captured reading."""
    base = torch.arange(24.0).reshape(4, 6)
    for t in (base.t(), base[:, 1:4], torch.ones(()).expand(3, 5), torch.arange(3.0).reshape(3, 1).expand(3, 4)):
        mine, span = _own(t)
        assert mine.stride() == t.stride() and torch.equal(mine, t)
        assert span.numel() == (1 + sum((s - 1) * st for s, st in zip(t.shape, t.stride())))
        assert mine.data_ptr() == span.data_ptr() and mine.data_ptr() != t.data_ptr()


@pytest.mark.gpu
def test_training_steps_replay_forward_and_backward(tmp_path):
    """A training step's forward and backward graphs each replayed: the losses and the weights follow
    eager's step for step, the batch new each step, the incoming gradient an expanded scalar (a sum's) on
    some steps and a dense tensor on others."""
    torch.manual_seed(0)
    earlier = {id(r) for r in _replayed()}
    model = nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 8)).cuda()
    ours = copy.deepcopy(model)
    compiled = akg_agent.compile(ours, cache_dir=str(tmp_path), seeds=(0,))
    opts = [torch.optim.SGD(m.parameters(), lr=0.05) for m in (model, ours)]
    for step in range(6):
        x = torch.randn(16, 32, device="cuda")
        losses = []
        for fn, opt in zip((model, compiled), opts):
            opt.zero_grad()
            loss = fn(x).sum() / 128 if step in (1, 2, 4) else fn(x).square().mean()
            loss.backward()
            opt.step()
            losses.append(loss.detach())
        torch.testing.assert_close(losses[1], losses[0], rtol=1e-5, atol=1e-6)
    for p, q in zip(ours.parameters(), model.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6)
    graphs = compiled.akg_report.graphs
    assert [g.name.split(".")[-1] for g in graphs] == ["forward", "backward"]
    assert all(g.replayed == 1 for g in graphs), [g.notes for g in graphs]
    fw, bw = _replayed(earlier)
    assert fw.handed and set(bw.borrowed) and not bw.handed  # the saved activations read in the forward's pool


def _replayed(earlier: set[int] = frozenset()) -> list[Replayed]:
    """The captured replays alive, those of ids in `earlier` left out; a training forward's first."""
    return sorted((o for o in gc.get_objects() if isinstance(o, Replayed) and o.graph is not None
                   and id(o) not in earlier), key=lambda r: r.saved_from is None)


@pytest.mark.gpu
def test_a_forward_whose_saved_activations_are_held_runs_as_written(tmp_path):
    """Two forward passes before their backward passes (the first's activations still held): the second
    runs as written rather than replaying over them, and both gradients are eager's."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 8)).cuda()
    compiled = akg_agent.compile(copy.deepcopy(model), cache_dir=str(tmp_path), seeds=(0,))
    params = list(compiled.parameters())
    for _ in range(3):  # captured by now
        torch.autograd.grad(compiled(torch.randn(16, 32, device="cuda")).square().mean(), params)
    xs = [torch.randn(16, 32, device="cuda") for _ in range(2)]
    losses = [compiled(x).square().mean() for x in xs]
    got = [torch.autograd.grad(loss, params) for loss in reversed(losses)][::-1]
    for x, g in zip(xs, got):
        want = torch.autograd.grad(model(x).square().mean(), list(model.parameters()))
        for a, b in zip(g, want):
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


@pytest.mark.gpu
def test_replay_keeps_a_plain_calls_meaning(tmp_path):
    torch.manual_seed(0)
    model = Block().eval().cuda()
    compiled = akg_agent.compile(model, cache_dir=str(tmp_path), seeds=(0,))
    with torch.no_grad():
        outs = []
        for _ in range(4):
            x = torch.randn(8, 32, device="cuda")
            outs.append((compiled(x), model(x)))
        for got, want in outs:  # every call's answer, none overwritten by a later replay
            torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
        model.a.weight.mul_(0.5)  # read in place by the replay
        x = torch.randn(8, 32, device="cuda")
        torch.testing.assert_close(compiled(x), model(x), rtol=1e-4, atol=1e-4)
    (graph,) = compiled.akg_report.graphs
    assert graph.replayed == 1, graph.notes
    assert "1 replayed as a CUDA graph" in graph.line()


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_writes_to_inputs_and_buffers_reach_the_callers_tensors(device, tmp_path):
    """A written module returns values; AOTAutograd's functional graph of an in-place op copies its writes
    back (they were dropped before: the caller's tensor kept its old value)."""
    compiled = akg_agent.compile(Bumps(), cache_dir=str(tmp_path), seeds=(0,))
    for _ in range(3):
        x = torch.randn(16, device=device)
        want = (x + 1) * 2
        torch.testing.assert_close(compiled(x), want)
        torch.testing.assert_close(x, want / 2)  # the caller's tensor was written
    model = Cache().to(device)
    compiled = akg_agent.compile(model, cache_dir=str(tmp_path), seeds=(0,))
    with torch.no_grad():
        for _ in range(3):
            x = torch.randn(8, device=device)
            torch.testing.assert_close(compiled(x), x * 2)
            torch.testing.assert_close(model.kv[1], x)
    assert all(g.name.endswith(".forward") and g.torch_sizes == 0 for g in compiled.akg_report.graphs)


@pytest.mark.gpu
def test_a_call_that_reads_host_state_is_dropped_to_plain_calls():
    state, notes = [0], []

    def fn(x):
        state[0] += 1
        return (x * state[0],)  # a host value baked into the launch: a replay would repeat it
    r = Replayed(fn, [False], notes.append)
    x = torch.ones(4, device="cuda")
    assert [float(r(x)[0][0]) for _ in range(4)] == [1.0, 2.0, 5.0, 6.0]  # capture spent 3 and 4
    assert r.graph is None and r.failed and "replay differed" in notes[0]
