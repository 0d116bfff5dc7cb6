"""A written module's call replayed as one CUDA graph: the launches' host cost paid once, at capture.

A model's graph of 30-60 kernels spends more time in Python launching them (guard, allocations, Triton's
argument binding) than the H200 spends running them at batch 8 x 512 in bf16. Capturing the call in a CUDA
graph removes that cost, as inductor's `mode="reduce-overhead"` does, with the semantics of a plain call:

- parameters and buffers (dynamo passes them as inputs) are read where they live; any other tensor input is
  copied into the graph's own buffer before each replay (skipped where the caller passes that very buffer),
  the memory span it covers copied whole so the buffer keeps the input's strides (an expanded gradient's
  zero strides too), all copies in one `_foreach_copy_`; a parameter moved to new storage is copied the same
  way, so replays never read stale values;
- outputs are cloned out of the graph's memory pool, so a later call never overwrites a returned tensor;
  except a training forward's saved activations, handed over in the pool: its backward graph, captured
  reading them there, copies nothing, and while any is still held (its backward has not run) the forward
  runs as written instead of replaying over it (the storage's use count against the one at capture);
- only graphs that neither mutate their inputs nor draw random numbers are captured (`ineligible`);
- the capture's first replay must equal the plain call on the same inputs, bit for bit, or the graph is
  dropped and the module runs as written (a kernel that reads a host value at launch would differ).
"""

from __future__ import annotations

import operator
import weakref
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import torch
import torch.fx

from ir.lift import RANDOM_OPS

from .verifier.policy import DEFAULT_TOLERANCES

# the address of each saved activation a forward graph's replays leave in its pool: its backward graph reads
# them there (`Replayed._capture`)
_HANDED: dict[int, weakref.ref[Replayed]] = {}


def _name(target: Any) -> str:
    return target if isinstance(target, str) else getattr(target, "__name__", str(target))


def _idle_dropout(n: torch.fx.Node) -> bool:
    """A dropout that draws nothing: evaluation mode or p = 0 (dynamo keeps the call in the graph)."""
    if "dropout" not in _name(n.target):
        return False
    args = list(n.args) + [None] * 3
    p, training = n.kwargs.get("p", args[1]), n.kwargs.get("training", n.kwargs.get("train", args[2]))
    return training is False or p == 0


def writes_in_place(gm: torch.fx.GraphModule) -> str:
    """The first in-place op of a graph ("" if none): its writes to an input must reach the caller's tensor."""
    for n in gm.graph.nodes:
        if n.op not in ("call_function", "call_method"):
            continue
        name = _name(n.target)
        schema = getattr(n.target, "_schema", None)
        if (n.target is operator.setitem or (schema is not None and schema.is_mutable)
                or (name.endswith("_") and not name.startswith("_"))):
            return name
    return ""


def ineligible(gm: torch.fx.GraphModule) -> str:
    """Why this graph must not be replayed as a CUDA graph ("" where it may): an in-place op (its writes to
    an input would land in the graph's copy) or a random draw (each call must draw afresh)."""
    if op := writes_in_place(gm):
        return f"it writes in place ({op})"
    if op := draws_random(gm):
        return f"it draws random numbers ({op})"
    return ""


def draws_random(gm: torch.fx.GraphModule) -> str:
    """The first op of a graph that draws random numbers ("" if none; a dropout that draws nothing aside)."""
    for n in gm.graph.nodes:
        if n.op in ("call_function", "call_method") and any(r in _name(n.target).lower() for r in RANDOM_OPS) \
                and not _idle_dropout(n):
            return _name(n.target)
    return ""


def static_inputs(gm: torch.fx.GraphModule, args: Sequence[Any]) -> list[bool]:
    """Which inputs are the model's parameters and buffers (dynamo passes them as inputs): read in place by
    a replay, kept as they are by the verifier."""
    names = [n.name for n in gm.graph.nodes if n.op == "placeholder"]
    return [isinstance(a, torch.nn.Parameter) or "_parameters_" in p or "_buffers_" in p
            for a, p in zip(args, names)]


def _span(t: torch.Tensor) -> torch.Tensor:
    """The memory `t` covers, from its first element to its last, as a flat tensor (gaps included)."""
    n = 1 + sum((s - 1) * st for s, st in zip(t.shape, t.stride())) if t.numel() else 0
    return t.as_strided((n,), (1,))


def _own(t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A buffer laid out as `t` (its strides kept), holding `t`'s values, and the flat span behind it."""
    src = _span(t)
    base = torch.empty(src.shape, dtype=t.dtype, device=t.device)
    base.copy_(src)
    return base.as_strided(t.shape, t.stride()), base


def _uses(t: torch.Tensor) -> int:
    """How many tensors hold `t`'s storage."""
    return torch._C._storage_Use_Count(t.untyped_storage()._cdata)


def _lent(a: torch.Tensor) -> bool:
    """`a` is a saved activation a replayed forward graph handed over in its pool."""
    owner = _HANDED.get(a.data_ptr())
    graph = owner() if owner is not None else None
    return graph is not None and graph.graph is not None


def _fixed_in_place(args: Sequence[Any], ptrs: list[int | None], idx: list[int]) -> bool:
    """Every input at `idx` still at its address (`ptrs`, by input position; a parameter keeps its strides
    where it keeps its storage: dynamo guards them)."""
    if not idx:
        return True
    check = getattr(torch._C, "_tensors_data_ptrs_at_indices_equal", None)  # CUDA builds of torch only
    if check is not None:
        return bool(check(list(args), ptrs, idx))
    return all(args[i].data_ptr() == ptrs[i] for i in idx)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.shape == b.shape and bool(torch.equal(a, b))
    return a == b


def _same_rounding(got: Any, want: Any, again: Any) -> bool:
    """Whether a replay `got` differs from a plain call `want` only as a second plain call `again` does, in
    rounding: a module whose sums run in no fixed order (atomic adds) differs from itself bit for bit.
    Each value of `again` and of `got` must lie within the verifier's tolerance of `want` for its dtype,
    so a launch that bakes host state (values far apart) is still told apart."""
    if not isinstance(want, torch.Tensor):
        return _same(got, want) and _same(again, want)
    if not (isinstance(got, torch.Tensor) and isinstance(again, torch.Tensor)) or got.shape != want.shape \
            or again.shape != want.shape or got.dtype != want.dtype:
        return False
    if not want.is_floating_point():
        return bool(torch.equal(got, want)) and bool(torch.equal(again, want))
    atol, rtol = DEFAULT_TOLERANCES.get(want.dtype, (0.0, 0.0))
    w = want.double()
    bound = atol + rtol * w.abs()
    spread = (again.double() - w).abs()
    return bool((spread <= bound).all()) and bool(((got.double() - w).abs() <= bound + spread).all())


def _difference(got: Sequence[Any], want: Sequence[Any], again: Sequence[Any]) -> str:
    """Where a replay first differs from a plain call, and by how much beside a second plain call: what a
    reader needs to tell a launch baking host state from sums in no fixed order."""
    if len(got) != len(want):
        return f" ({len(got)} outputs against {len(want)})"
    i = next(i for i, (g, w) in enumerate(zip(got, want)) if not _same(g, w))
    g, w, a = got[i], want[i], again[i]
    if not (isinstance(g, torch.Tensor) and isinstance(w, torch.Tensor) and g.shape == w.shape
            and g.dtype == w.dtype and g.is_floating_point()):
        return f" (output {i})"
    off = float((g.double() - w.double()).abs().max())
    spread = float((a.double() - w.double()).abs().max()) if isinstance(a, torch.Tensor) and a.shape == w.shape else \
        float("nan")
    return (f" (output {i}, {tuple(w.shape)} {str(w.dtype).replace('torch.', '')}: replay off by up to {off:.3g}, "
            f"a second plain call by {spread:.3g}, largest value {float(w.double().abs().max()):.3g})")


class Recorder(Protocol):
    """Captures one call and replays it: the same kernels on the same memory, the outputs rewritten in place."""

    def capture(self, fn: Callable[..., tuple[Any, ...]], ins: Sequence[Any]) -> tuple[Any, ...]: ...

    def replay(self) -> None: ...


class CudaGraph:
    """A CUDA graph on the current device (the `Recorder` the GPU path uses)."""

    def __init__(self) -> None:
        self.graph: torch.cuda.CUDAGraph | None = None

    def capture(self, fn: Callable[..., tuple[Any, ...]], ins: Sequence[Any]) -> tuple[Any, ...]:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # the warm-up torch asks for before a capture
            fn(*ins)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            outs = fn(*ins)
        self.graph = graph
        return outs

    def replay(self) -> None:
        assert self.graph is not None
        self.graph.replay()


class Replayed:
    """`fn` (a written module's call, its outputs a tuple) run plainly on its first call, captured on its
    second, and replayed from then on. `note` receives one line on a capture that failed or differed,
    `remark` one on a replay kept though it differed in rounding. `recorder` makes the capture (a
    `CudaGraph`; tests pass one that replays by calling `fn` again)."""

    def __init__(self, fn: Callable[..., tuple[Any, ...]], static: list[bool], note: Callable[[str], None],
                 saved_from: int | None = None, recorder: Callable[[], Recorder] = CudaGraph,
                 remark: Callable[[str], None] | None = None):
        self.fn, self.static, self.note, self.recorder = fn, static, note, recorder
        self.remark = remark or (lambda _line: None)
        self.saved_from = saved_from  # a training forward: its outputs from here on are saved activations
        self.calls = 0
        self.graph: Recorder | None = None
        self.ins: list[Any] = []
        self.spans: list[torch.Tensor | None] = []  # the flat memory behind each input the graph owns
        self.borrowed: dict[int, tuple[int, tuple[int, ...]]] = {}  # input -> (address, strides) in a forward's pool
        self.outs: tuple[Any, ...] = ()
        self.handed: dict[int, int] = {}  # output handed over in the pool -> its storage's use count at capture
        self.passed: dict[int, int] = {}  # output -> the input it is
        self.failed = False
        self.fixed: list[int] = []  # inputs the graph reads in place, and their addresses at capture
        self.fixed_set: frozenset[int] = frozenset()
        self.fixed_ptrs: list[int | None] = []

    def __call__(self, *args: Any) -> tuple[Any, ...]:
        if self.graph is not None:
            return self._replay(args)
        self.calls += 1
        if self.failed or self.calls < 2:  # the first call compiles the kernels: capture cannot
            return self.fn(*args)
        want = self.fn(*args)
        self._capture(args)
        if self.graph is not None:
            got = self._replay(args)
            if len(got) == len(want) and all(_same(g, w) for g, w in zip(got, want)):
                return got  # a forward's saved activations handed over from this call on
            again = self.fn(*args)
            shaky = any(not _same(a, w) for a, w in zip(again, want))  # plain calls differ among themselves
            if shaky and len(got) == len(want) and all(map(_same_rounding, got, want, again)):
                self.remark("CUDA graph kept: plain calls differ among themselves in rounding (sums in no fixed "
                          "order) and its replay no more than that")
                return got
            self.graph, self.failed = None, True
            self.note("CUDA graph dropped: its replay differed from the plain call on the same inputs"
                      + _difference(got, want, again))
        return want

    def _capture(self, args: Sequence[Any]) -> None:
        # a forward's saved activation is read where its replay left it; any other input gets a buffer
        self.borrowed = {i: (a.data_ptr(), a.stride()) for i, (a, s) in enumerate(zip(args, self.static))
                         if isinstance(a, torch.Tensor) and not s and _lent(a)}
        owned = [_own(a) if isinstance(a, torch.Tensor) and not s and i not in self.borrowed else (a, None)
                 for i, (a, s) in enumerate(zip(args, self.static))]
        self.ins, self.spans = [a for a, _ in owned], [b for _, b in owned]
        graph = self.recorder()
        try:
            self.outs = graph.capture(self.fn, self.ins)
        except Exception as e:  # noqa: BLE001 - a call that cannot be captured runs as written
            self.failed, self.ins = True, []
            self.note(f"CUDA graph not captured ({type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''});"
                      " runs without")
            return
        self.graph = graph
        # outputs that are inputs handed back (a forward's saved weights): the caller's own, never a copy
        self.passed = {i: next(j for j, a in enumerate(self.ins) if a is o) for i, o in enumerate(self.outs)
                       if isinstance(o, torch.Tensor) and any(a is o for a in self.ins)}
        self.ins = [None if i in self.borrowed else a for i, a in enumerate(self.ins)]  # the forward's pool keeps them
        # inputs read where they live (parameters, buffers): one C call per replay checks none moved, where a
        # Python check of each (its address and strides) cost BERT's replay 40 us of host time
        self.fixed = [i for i, (a, s) in enumerate(zip(args, self.static)) if s and isinstance(a, torch.Tensor)
                      and self.ins[i] is a]
        self.fixed_set = frozenset(self.fixed)
        self.fixed_ptrs = [a.data_ptr() if i in self.fixed_set else None for i, a in enumerate(args)]
        if self.saved_from is not None:  # saved activations in the pool (not an input's memory) are handed over
            held = {a.untyped_storage().data_ptr() for a in self.ins if isinstance(a, torch.Tensor)}
            pooled = [i for i, o in enumerate(self.outs) if i >= self.saved_from and isinstance(o, torch.Tensor)
                      and o.untyped_storage().data_ptr() not in held]
            self.handed = {i: _uses(self.outs[i]) for i in pooled}
            for ptr in [p for p, ref in _HANDED.items() if ref() is None]:  # graphs since collected
                del _HANDED[ptr]
            for i in pooled:
                _HANDED[self.outs[i].data_ptr()] = weakref.ref(self)

    def _replay(self, args: Sequence[Any]) -> tuple[Any, ...]:
        assert self.graph is not None
        moved = any(args[i].data_ptr() != ptr or args[i].stride() != st for i, (ptr, st) in self.borrowed.items())
        if moved or any(_uses(self.outs[i]) != uses for i, uses in self.handed.items()):
            # an activation saved elsewhere (its forward ran as written), or one handed over still held (its
            # backward has not run: a replay would overwrite it): this call runs as written
            return self.fn(*args)
        dst: list[torch.Tensor] = []
        src: list[torch.Tensor] = []
        skip = self.fixed_set if _fixed_in_place(args, self.fixed_ptrs, self.fixed) else frozenset()
        for i, (a, mine, span) in enumerate(zip(args, self.ins, self.spans)):
            if i in skip or not isinstance(a, torch.Tensor) or mine is None or a.data_ptr() == mine.data_ptr() \
                    and a.stride() == mine.stride():
                continue
            if a.stride() == mine.stride() and span is not None:
                dst.append(span)
                src.append(_span(a))
            elif torch._debug_has_internal_overlap(mine) == 0:  # other strides: copied element by element
                mine.copy_(a)
            else:  # an expanded buffer cannot take other strides' values: this call runs plainly
                return self.fn(*args)
        if dst:
            torch._foreach_copy_(dst, src)
        self.graph.replay()
        # a handed-over activation goes out as a new tensor on the pool's storage: whoever saves it holds that
        # storage (what `_uses` counts), where saving the very tensor the graph holds would count nothing
        return tuple(args[self.passed[i]] if i in self.passed else o if not isinstance(o, torch.Tensor) else
                     o.detach() if i in self.handed else o.clone() for i, o in enumerate(self.outs))
