"""CUDA-graph replay of written modules (`akg_agent.cuda_graphs`): which graphs may be replayed (CPU), and on
a GPU that a replay keeps a plain call's meaning: new inputs, parameters changed in place, returned tensors
never overwritten, and a call whose launches read host state dropped back to plain calls."""

from __future__ import annotations

import copy
import ctypes
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
    """The captured replays alive, those of ids in `earlier` left out; a training forward's first. The type is
    compared, not isinstance'd: isinstance on a dead weak proxy among gc's objects raises."""
    alive = (o for o in gc.get_objects() if type(o) is Replayed)  # noqa: E721
    return sorted((o for o in alive if o.graph is not None and id(o) not in earlier),
                  key=lambda r: r.saved_from is None)


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
    # capture spent 3 and 4; the replay differing, a second plain call (5) told host state from rounding
    assert [float(r(x)[0][0]) for _ in range(4)] == [1.0, 2.0, 6.0, 7.0]
    assert r.graph is None and r.failed and "replay differed" in notes[0]


def _at(t: torch.Tensor) -> torch.Tensor:
    """`t`'s memory as a tensor that does not hold `t`'s storage (what a captured kernel holds: an address)."""
    st = t.untyped_storage()
    raw = torch.frombuffer((ctypes.c_char * st.nbytes()).from_address(st.data_ptr()), dtype=torch.uint8)
    return raw.view(t.dtype).as_strided(t.shape, t.stride(), t.storage_offset())


class Emulated:
    """A CPU stand-in for a CUDA graph: a replay calls the captured function again on the captured addresses
    and writes its answers over the captured outputs (the same memory, new values)."""

    def __init__(self) -> None:
        self.replays = 0

    def capture(self, fn, ins):
        self.fn, self.ins = fn, [_at(a) if isinstance(a, torch.Tensor) else a for a in ins]
        outs = fn(*ins)
        self.outs = [_at(o) if isinstance(o, torch.Tensor) else o for o in outs]
        return outs

    def replay(self) -> None:
        self.replays += 1
        for mine, new in zip(self.outs, self.fn(*self.ins)):
            if isinstance(mine, torch.Tensor):
                mine.copy_(new)


def _forward(x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, ...]:
    a = torch.tanh(x @ w)
    return a.sum(1), a, x  # the output, then what the backward needs (AOTAutograd's order)


def _backward(a: torch.Tensor, x: torch.Tensor, g: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return (x.t() @ ((1 - a * a) * g[:, None]),)


def test_saved_activations_handed_over_are_never_replayed_over():
    """A forward graph's replays hand its saved activations to the backward graph in its own memory. A
    second forward while the first's are still held (two passes before their backward passes) runs as
    written; the first's backward still reads its own activations; once they are released, replays resume."""
    notes: list[str] = []
    fw = Replayed(_forward, [False, True], notes.append, saved_from=1, recorder=Emulated)
    bw = Replayed(_backward, [False, False, False], notes.append, recorder=Emulated)

    class Step(torch.autograd.Function):  # what AOTAutograd's runtime does with the two graphs
        @staticmethod
        def forward(ctx, x, w):
            y, *saved = fw(x, w)
            ctx.save_for_backward(*saved)
            return y

        @staticmethod
        def backward(ctx, g):
            return None, bw(*ctx.saved_tensors, g)[0]

    torch.manual_seed(0)
    w = torch.randn(8, 8, requires_grad=True)

    def want(x):
        return torch.autograd.grad(torch.tanh(x @ w).sum(1).square().sum(), w)[0]

    def loss(x):
        return Step.apply(x, w).square().sum()

    for _ in range(4):  # plain, captured, replayed, replayed
        x = torch.randn(16, 8)
        torch.testing.assert_close(torch.autograd.grad(loss(x), w)[0], want(x))
    assert fw.handed and set(bw.borrowed) == {0} and fw.graph.replays == bw.graph.replays == 3, notes
    xs = [torch.randn(16, 8) for _ in range(2)]
    losses = [loss(x) for x in xs]  # the second while the first's activations are held: as written
    assert fw.graph.replays == 4
    got = [torch.autograd.grad(one, w)[0] for one in reversed(losses)][::-1]
    for x, g in zip(xs, got):
        torch.testing.assert_close(g, want(x))
    assert bw.graph.replays == 4  # the first's backward replayed on its own activations, the second's not
    x = torch.randn(16, 8)
    torch.testing.assert_close(torch.autograd.grad(loss(x), w)[0], want(x))
    assert fw.graph.replays == bw.graph.replays == 5 and not notes


def test_an_input_handed_back_is_the_callers_own_tensor():
    """A forward that returns an input as it is (a weight saved for the backward): each replay hands back
    the caller's tensor itself, never the captured buffer or a copy of it."""
    def fn(x, w):
        return torch.tanh(x @ w), w, x

    r = Replayed(fn, [False, True], [].append, recorder=Emulated)
    w = torch.randn(8, 8)
    for _ in range(4):  # plain, captured, replayed, replayed
        x = torch.randn(4, 8)
        y, w_out, x_out = r(x, w)
        torch.testing.assert_close(y, torch.tanh(x @ w))
        assert w_out is w  # a static input: its very tensor
        torch.testing.assert_close(x_out, x)  # a copied-in input: its value, not a buffer the next replay overwrites
    assert r.graph is not None and r.graph.replays == 3 and r.passed == {1: 1, 2: 0}
    assert x_out is x


def _shaky(calls: list[int], step: float):
    """A module whose sums run in no fixed order: each call's answer is off from the last by `step` of
    its magnitude (a rounding's worth for fp32 at 2**-22; host state at 1.0)."""
    def fn(x):
        calls[0] += 1
        return (x * (1.0 + step * calls[0]), (x > 0).sum())
    return fn


def test_a_replay_that_differs_only_in_rounding_is_kept():
    """A module that differs from itself bit for bit (atomic sums) keeps its CUDA graph when the replay
    stays within a second plain call's rounding and the verifier's tolerance: it is replayed from then on."""
    notes: list[str] = []
    kept: list[str] = []
    r = Replayed(_shaky([0], 2.0 ** -22), [False], notes.append, recorder=Emulated, remark=kept.append)
    for _ in range(4):  # plain, captured (its replay differs in rounding), replayed, replayed
        x = torch.randn(64)
        y, pos = r(x)
        torch.testing.assert_close(y, x, rtol=1e-5, atol=0.0)
        assert int(pos) == int((x > 0).sum())
    assert r.graph is not None and r.graph.replays == 3 and not notes
    assert len(kept) == 1 and "rounding" in kept[0]


def test_a_replay_far_from_plain_calls_that_also_differ_is_dropped():
    """Plain calls that differ by far more than rounding (a launch baking host state): dropped, as before."""
    notes: list[str] = []
    r = Replayed(_shaky([0], 1.0), [False], notes.append, recorder=Emulated, remark=notes.append)
    for _ in range(3):
        r(torch.randn(64))
    assert r.graph is None and r.failed and len(notes) == 1 and "replay differed" in notes[0]
    assert "(output 0, (64,) float32: replay off by up to" in notes[0] and "a second plain call by" in notes[0]


def test_an_integer_output_that_differs_drops_the_replay():
    notes: list[str] = []
    calls = [0]

    def fn(x):
        calls[0] += 1
        return (x * (1.0 + 2.0 ** -22 * (calls[0] % 2)), torch.tensor(calls[0]))
    r = Replayed(fn, [False], notes.append, recorder=Emulated)
    for _ in range(3):
        r(torch.randn(8))
    assert r.graph is None and "replay differed" in notes[0]


def test_a_parameter_moved_to_new_storage_is_copied_in_before_a_replay():
    """Parameters are read where they live, checked by one C call per replay (their addresses at capture):
    a parameter given new storage (`p.data = ...`, a checkpoint loaded by assignment) is noticed, and its
    new values reach the replay."""
    def fn(x, w):
        return (torch.tanh(x @ w),)

    r = Replayed(fn, [False, True], [].append, recorder=Emulated)
    w = torch.randn(8, 8)
    for _ in range(3):  # plain, captured, replayed: w in place
        x = torch.randn(4, 8)
        torch.testing.assert_close(r(x, w)[0], torch.tanh(x @ w))
    assert r.fixed == [1]
    moved = torch.randn(8, 8)  # new storage, new values
    x = torch.randn(4, 8)
    torch.testing.assert_close(r(x, moved)[0], torch.tanh(x @ moved))
    assert r.graph is not None and r.graph.replays == 3  # the capture replays once
