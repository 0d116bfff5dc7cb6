"""Pointwise kernels that store over a dead operand. A kernel whose output has the shape and dtype of
an intermediate it reads, which it reads only at the output's own coordinates and nothing reads after
it, may take that intermediate's storage instead of a fresh buffer: each element is read before the
same element is written, and a fresh output's first write (a read for ownership of every line, and
new pages where the heap gives them) costs as much as the read. The epilogue after a library GEMM or
convolution is the common case.

Only buffers forward owns qualify: a generated kernel's output, or a library call that returns new
storage (not a view; an opaque call may return its operand)."""

from __future__ import annotations

from dataclasses import replace

from ..passes.library import LIBRARY_FAMILIES
from .ir import Kernel, KernelProgram, LibraryCall, Load, walk

# library ops whose torch call returns storage of its own
FRESH_CALLS = frozenset({op for ops in LIBRARY_FAMILIES.values() for op in ops} |
                        {"conv", "conv_transpose", "max_pool", "avg_pool", "adaptive_avg_pool", "adaptive_max_pool"})


def _at_own_coords(k: Kernel, name: str) -> bool:
    loads = [e for x in (k.expr, *(e for _, e in k.also)) for e in walk(x)
             if isinstance(e, Load) and e.buf.name == name]
    return bool(loads) and all(ld.mask is None and ld.index == k.coords for ld in loads)


def in_place_program(prog: KernelProgram) -> KernelProgram:
    """`prog` with each qualifying pointwise kernel marked to store over its operand (`Kernel.in_place`)."""
    kept = {b.name for b in [*prog.outputs, *prog.inputs, *prog.params]} | set(prog.aliases) | \
        set(prog.aliases.values()) | set(prog.consts)
    reads: list[set[str]] = [{b.name for b in s.inputs()} if isinstance(s, Kernel) else
                             {b.name for b in s.args if b is not None} for s in prog.steps]
    owned: set[str] = set()  # buffers forward allocates (or a library call returns new)
    steps = list(prog.steps)
    for i, s in enumerate(steps):
        if isinstance(s, LibraryCall):
            if s.op in FRESH_CALLS:
                owned.add(s.out.name)
            continue
        if s.kind == "pointwise" and not s.also:
            later = set().union(*reads[i + 1:])
            for b in s.inputs():
                if (b.name in owned and b.name not in kept and b.name not in later and b.shape == s.out.shape
                        and b.dtype == s.out.dtype and _at_own_coords(s, b.name)):
                    steps[i] = s = replace(s, in_place=b.name)
                    break
        owned.update(b.name for b in s.outs())
    return replace(prog, steps=steps)
