"""Pointwise and row kernels that store over a dead operand. A kernel whose output has the shape and
dtype of an intermediate it reads, which it reads only at the output's own coordinates (a row kernel's
reductions: anywhere in the row, all read before the row is written) and nothing reads after it, may
take that intermediate's storage instead of a fresh buffer: each element is read before the same
element is written, and a fresh output's first write (a read for ownership of every line, and
new pages where the heap gives them) costs as much as the read. The epilogue after a library GEMM or
convolution is the common case.

Only buffers forward owns qualify: a generated kernel's output, or a library call that returns new
storage (not a view; an opaque call may return its operand)."""

from __future__ import annotations

from dataclasses import replace

from ..passes.library import LIBRARY_FAMILIES
from .analysis import row_split
from .ir import Expr, Kernel, KernelProgram, LibraryCall, Load, Reduce, walk

# library ops whose torch call returns storage of its own
FRESH_CALLS = frozenset({op for ops in LIBRARY_FAMILIES.values() for op in ops} |
                        {"conv", "conv_transpose", "max_pool", "max_pool_indices", "avg_pool", "adaptive_avg_pool",
                         "adaptive_max_pool"})


def _reads_safely(k: Kernel, name: str) -> bool:
    """Each element of `name` is read before the same element of the output is written, and no other:
    outside reductions, only at the output's own coordinates; a row kernel's reductions (all of a row's,
    computed before its sweep writes) only within the row."""
    def reads(e: Expr, skip: type | tuple[type, ...] = ()) -> list[Load]:
        return [x for x in walk(e, skip) if isinstance(x, Load) and x.buf.name == name]

    outside, inside = reads(k.expr, Reduce), [ld for r in k.reductions() for ld in reads(r.body)]
    if not outside and not inside or any(ld.mask is not None or ld.index != k.coords for ld in outside):
        return False
    if k.kind == "pointwise":
        return not inside
    split = row_split(k) if k.kind == "rownorm" else None
    return split is not None and all(ld.mask is None and ld.index[i] == c for ld in inside
                                     for i, c in enumerate(k.coords) if c in split[0])


def in_place_program(prog: KernelProgram) -> KernelProgram:
    """`prog` with each qualifying pointwise or row kernel marked to store over its operand
    (`Kernel.in_place`)."""
    # a buffer another name views (a library view, an opaque call that may return it) shares its storage
    viewed = {b.name for s in prog.steps if isinstance(s, LibraryCall) and s.op not in FRESH_CALLS
              for b in s.args if b is not None}
    kept = {b.name for b in [*prog.outputs, *prog.inputs, *prog.params]} | set(prog.aliases) | \
        set(prog.aliases.values()) | set(prog.consts) | viewed
    last_read: dict[str, int] = {}  # buffer -> the last step that reads it
    for i, s in enumerate(prog.steps):
        for b in s.inputs() if isinstance(s, Kernel) else [a for a in s.args if a is not None]:
            last_read[b.name] = i
    owned: set[str] = set()  # buffers forward allocates (or a library call returns new)
    steps = list(prog.steps)
    for i, s in enumerate(steps):
        if isinstance(s, LibraryCall):
            if s.op in FRESH_CALLS:
                owned.add(s.out.name)
            continue
        if s.kind in ("pointwise", "rownorm") and not s.also:
            for b in s.inputs():
                if (b.name in owned and b.name not in kept and last_read[b.name] == i and b.shape == s.out.shape
                        and b.dtype == s.out.dtype and _reads_safely(s, b.name)):
                    steps[i] = s = replace(s, in_place=b.name)
                    break
        owned.update(b.name for b in s.outs())
    return replace(prog, steps=steps)
