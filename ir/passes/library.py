"""Library strategies: families of ops a plan may leave to the library (torch: cuBLAS, cuDNN, MKL,
oneDNN) instead of generating, while their prologues and epilogues stay in generated kernels. A tune
measures each family both ways; the faster is kept. Composite families stay whole through
decomposition (`decompose{keep=...}`); primitive families are marked by this pass, and lowering
(`kernel.lower.needs_library`) turns a marked node into a declared library call."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import ClassVar

from ..errors import AkgError
from ..graph import Graph, Node
from ..ops import opdef
from .base import Firing, Trace, register

LIBRARY_FAMILIES: dict[str, tuple[str, ...]] = {
    "gemm": ("matmul", "linear"),
    "attention": ("attention",),
    "norm": ("layer_norm", "group_norm", "batch_norm", "instance_norm", "rms_norm"),
    "softmax": ("softmax", "log_softmax", "logsumexp"),
    "reduce": ("sum", "mean", "amax", "amin", "prod", "var", "std", "norm", "argmax", "argmin"),
    "window": ("max_pool", "max_pool_indices", "avg_pool"),
    "scan": ("cumsum", "cumprod"),
}
LIBRARY_MARK = "library"  # node meta key: this node is a library call


def check_families(families: Iterable[str]) -> tuple[str, ...]:
    """The families in table order; an unknown name is a one-line error listing the known ones."""
    wanted = set(families)
    unknown = sorted(wanted - set(LIBRARY_FAMILIES))
    if unknown:
        raise AkgError(f"unknown library famil{'ies' if len(unknown) > 1 else 'y'} {', '.join(unknown)}: "
                       f"choose from {', '.join(LIBRARY_FAMILIES)}")
    return tuple(f for f in LIBRARY_FAMILIES if f in wanted)


def kept_composites(families: Iterable[str]) -> tuple[str, ...]:
    """Composite ops of these families: decomposition leaves them whole."""
    return tuple(op for f in check_families(families) for op in LIBRARY_FAMILIES[f]
                 if opdef(op).group == "composite")


def marked_primitives(families: Iterable[str]) -> tuple[str, ...]:
    """Primitive ops of these families: this pass marks them."""
    return tuple(op for f in check_families(families) for op in LIBRARY_FAMILIES[f]
                 if opdef(op).group != "composite")


def families_of(ops: Iterable[str]) -> tuple[str, ...]:
    """The families a program with these (lifted, not yet decomposed) ops could leave to the library."""
    present = set(ops)
    return tuple(f for f, members in LIBRARY_FAMILIES.items() if present & set(members))


# torch gives these as views of their operand where the strides allow (module.TORCH_CALLS); a reshape
# it cannot view, torch copies, as eager does
VIEW_OPS = ("permute", "slice", "reshape")


def is_view(n: Node) -> bool:
    """A view op of sizes fixed at translation (a run-time size stays in generated index arithmetic)."""
    fixed = [n.attrs.get(k, 0) for k in ("start", "end", "step")] + list(n.attrs.get("shape", ()))
    return n.op in VIEW_OPS and all(isinstance(v, int) for v in fixed)


def library_op(n: Node) -> bool:
    """A node lowering makes a torch (library) call whatever its plan: marked by this pass, or a channels-last
    convolution."""
    return bool(n.meta.get(LIBRARY_MARK)) or bool(n.attrs.get("channels_last"))


def _torch_call(n: Node) -> bool:
    """A library op or a composite decomposition kept whole (attention, a norm): lowering makes each a torch
    call, which takes a strided view where a generated kernel needs its operand dense."""
    return library_op(n) or opdef(n.op).group == "composite"


def _passed_as_view(n: Node, users: list[Node]) -> bool:
    """Whether torch calls read `n` (a view) as it is. A channels-last convolution copies its operand into
    its layout itself: that copy replaces a generated kernel's only where the view is of a program input or
    weight (a computed value's view joins its producer's kernel, which then stores it transposed for free;
    torch's copy would be one more pass). Torch's copy of an image to channels last took a quarter of a
    generated flat loop's time on the CPU (the loop decodes four coordinates per element)."""
    if not users or not all(_torch_call(u) for u in users):
        return False
    src = n.args[0]
    return src is not None and (src.op in ("input", "param") or not any(u.attrs.get("channels_last") for u in users))


@register
@dataclass(frozen=True)
class MarkLibrary:
    """Marks nodes of the named ops as library calls (run after decomposition, before fusion). `min_rows`: a
    linear writing fewer rows stays generated (a recurrence's steps on the CPU, where MKL's call for 2 rows of a
    cache-resident weight took ~3x a generated one's)."""

    name: ClassVar[str] = "library"
    ops: tuple[str, ...] = ()
    min_rows: int = 0

    def _skinny(self, n: Node) -> bool:
        rows = n.type.shape[:-1]
        return n.op == "linear" and self.min_rows > 0 and all(isinstance(d, int) for d in rows) and \
            math.prod(rows) < self.min_rows  # type: ignore[arg-type]

    def run(self, g: Graph, trace: Trace) -> bool:
        changed = False
        for n in g.nodes:
            # a run-time size (--dynamic) may grow past the bound: the few rows traced say nothing
            if n.op in self.ops and not n.meta.get(LIBRARY_MARK) and (g.meta.get("dynamic") or not self._skinny(n)):
                n.meta[LIBRARY_MARK] = True
                trace.record(Firing(self.name, "library-call", n.name, n.op, f"torch {n.op}"))
                changed = True
        # an operand read only by library calls through a view (transposed, a slice such as a q/k/v chunk of
        # one projection) is passed as that view: cuBLAS and MKL read strided operands in place, where a
        # generated kernel would copy it first
        users, outs = g.users(), {id(o) for o in g.outputs}
        for n in reversed(g.nodes):
            if is_view(n) and not n.meta.get(LIBRARY_MARK) and id(n) not in outs and _passed_as_view(n, users[n]):
                n.meta[LIBRARY_MARK] = True
                trace.record(Firing(self.name, "library-view", n.name, n.op, "a view passed to the library"))
                changed = True
        return changed
