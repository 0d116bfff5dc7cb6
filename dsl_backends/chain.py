"""Runs of consecutive kernel steps that a written module calls once (a backend's `chains`): the host
language calls each kernel in turn, and the buffers no later step reads live in one scratch block, at
offsets reused as they die. On the CPU a forward's per-kernel cost is Python's: a call, a `torch.empty`
per output and a `data_ptr()` per argument (~8 us a step); a recurrent model unrolled into ~500 small
kernels spends more on that than on some of its kernels. A chain pays it once."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ir.kernel.ir import Buf, Kernel, KernelProgram, LibraryCall
from ir.types import DTYPES

SCRATCH_ALIGN = 64  # a cache line: a kernel's vector loads and stores never straddle two buffers' line


@dataclass(frozen=True)
class Chain:
    """`prog.steps[start:stop]`, every one a kernel, run by one call of `name(*inputs, *outputs)`: `inputs`
    are read from before the chain, `outputs` are written for later steps or the program's result (forward
    allocates both as for a single kernel), `scratch` places the rest at byte offsets of one block of
    `scratch_bytes`, two buffers sharing bytes only where one dies before the other is written."""

    name: str
    start: int
    stop: int
    inputs: tuple[Buf, ...]
    outputs: tuple[Buf, ...]
    scratch: tuple[tuple[Buf, int], ...]
    scratch_bytes: int

    def kernels(self, prog: KernelProgram) -> list[Kernel]:
        return [s for s in prog.steps[self.start:self.stop] if isinstance(s, Kernel)]


def _nbytes(b: Buf) -> int:
    return -(-b.numel * DTYPES[b.dtype].itemsize // SCRATCH_ALIGN) * SCRATCH_ALIGN


def reads(step: Kernel | LibraryCall) -> list[str]:
    """The buffers a step reads, by name."""
    if isinstance(step, Kernel):
        return [b.name for b in step.inputs()]
    return [b.name for b in step.args if b is not None]


def _place(order: list[Kernel], internal: set[str], last: dict[str, int]) -> tuple[list[tuple[Buf, int]], int]:
    """First fit over the chain's order: each kernel's scratch outputs placed before its dead inputs are
    freed (an output never shares bytes with what its own kernel reads)."""
    live: list[tuple[int, int, str]] = []  # (offset, size, name), by offset
    placed: list[tuple[Buf, int]] = []
    top = 0
    for i, k in enumerate(order):
        for b in k.outs():
            if b.name not in internal:
                continue
            size, at = _nbytes(b), 0
            for off, n, _ in live:
                if off - at >= size:
                    break
                at = max(at, off + n)
            live.append((at, size, b.name))
            live.sort()
            placed.append((b, at))
            top = max(top, at + size)
        # buffers whose last reader is this kernel, and outputs nothing reads
        live = [e for e in live if last.get(e[2], i) > i]
    return placed, top


def plan_chains(prog: KernelProgram, can_chain: Callable[[Kernel], bool], prefix: str = "akg_chain_",
                shortest: int = 2) -> list[Chain]:
    """The program's chains: maximal runs of at least `shortest` consecutive kernels that `can_chain` takes
    (whose launch is a plain call of the kernel's buffers), named after their first kernel."""
    escaping = {b.name for b in prog.outputs} | set(prog.aliases) | set(prog.aliases.values())
    last_reader: dict[str, int] = {}
    for i, step in enumerate(prog.steps):
        for name in reads(step):
            last_reader[name] = i
    runs: list[tuple[int, int]] = []
    start = None
    for i, step in enumerate([*prog.steps, None]):
        ok = isinstance(step, Kernel) and can_chain(step)
        if ok and start is None:
            start = i
        elif not ok and start is not None:
            if i - start >= shortest:
                runs.append((start, i))
            start = None
    chains = []
    for start, stop in runs:
        order = [s for s in prog.steps[start:stop] if isinstance(s, Kernel)]
        made = {b.name: b for k in order for b in k.outs()}
        inputs: dict[str, Buf] = {}
        for k in order:
            inputs.update((b.name, b) for b in k.inputs() if b.name not in made and b.name not in inputs)
        outputs = tuple(b for name, b in made.items() if name in escaping or last_reader.get(name, -1) >= stop)
        internal = set(made) - {b.name for b in outputs}
        last = {name: i - start for name, i in last_reader.items() if start <= i < stop}
        scratch, size = _place(order, internal, last)
        chains.append(Chain(prefix + order[0].name, start, stop, tuple(inputs.values()), outputs,
                            tuple(scratch), size))
    return chains


def chain_at(chains: Sequence[Chain], index: int) -> Chain | None:
    return next((c for c in chains if c.start == index), None)
