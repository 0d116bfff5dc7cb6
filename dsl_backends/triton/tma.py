"""Hopper TMA for Triton GEMMs: a plain operand (a whole buffer read as a row-major matrix, see
cstyle.views) is loaded tile by tile through a device-side tensor descriptor instead of pointer
arithmetic; the copy engine zero-fills past the edges, so no masks are needed.

Measured on the H100 (do_bench, default schedules): it does not help our GEMMs. gemm_fp32 3.65 ms
with TMA vs 3.60 with pointer loads, gemm_bf16_4k 0.427 vs 0.418 (and 0.200 vs 0.195 at 128x256x64);
it rescues schedules whose pointer loads spill (fp32 at BK=64: 29.0 -> 11.0 ms) but those lose anyway;
a transposed tile (nn.Linear's [N, K] weight, fp32) took 185 ms against 3.0. So it is off by default and
offered to `akg tune` only where no tile needs a transpose."""

from __future__ import annotations

from ir.kernel.analysis import split_gemm
from ir.kernel.ir import Kernel, Load
from ir.kernel.schedule import Schedule

from ..cstyle import View, views

ELEM_BYTES = {"f32": 4, "f16": 2, "bf16": 2}

# the written module gives Triton an allocator for device-side descriptors (set once, at import)
ALLOCATOR = '''

def _akg_tma_alloc(size, align, stream):  # scratch for device-side TMA descriptors
    return torch.empty(size, dtype=torch.int8, device="cuda" if torch.cuda.is_available() else "cpu")


triton.set_allocator(_akg_tma_alloc)


def _akg_aligned(t):  # TMA needs a 16-byte aligned base: a view starting mid-allocation is copied
    return t if t.data_ptr() % 16 == 0 else t.clone()
'''


def _qualified(k: Kernel, bk: int) -> list[tuple[str, Load, View]]:
    """(side, operand, view) for the operands TMA can load: a plain view with no batch, rows whose byte
    stride is a multiple of 16, and a 16- or 32-bit element type."""
    if k.kind != "matmul":
        return []
    g, shaped = split_gemm(k), views(k, bk)
    out = []
    for side, e in (("a", g.a), ("b", g.b)):
        v = shaped.get(e.buf.name) if isinstance(e, Load) else None
        if v and not v.batch and e.buf.dtype in ELEM_BYTES and v.shape[1] * ELEM_BYTES[e.buf.dtype] % 16 == 0:
            out.append((side, e, v))
    return out


def operands(k: Kernel, bk: int) -> dict[str, str]:
    """Buffer name -> "a" | "b" for the operands TMA can load with K step `bk`."""
    return {e.buf.name: side for side, e, _ in _qualified(k, bk)}


def loads(k: Kernel, bk: int) -> dict[int, tuple[str, str]]:
    """id(operand expression) -> (descriptor setup line, tile load in the K loop, as (BM|BK, BK|BN))."""
    out: dict[int, tuple[str, str]] = {}
    for side, e, v in _qualified(k, bk):
        r, c = v.shape
        own, tile = ("BM", "pm * BM") if side == "a" else ("BN", "pn * BN")
        block = f"[BK, {own}]" if v.k_first else f"[{own}, BK]"
        setup = (f"{side}_desc = tl.make_tensor_descriptor({e.buf.name}, shape=[{r}, {c}], strides=[{c}, 1], "
                 f"block_shape={block})")
        # A wants (BM, BK), B (BK, BN): a [K, M] A and an [N, K] B (a linear layer's weight) transpose
        at = f"[k0, {tile}]" if v.k_first else f"[{tile}, k0]"
        transpose = (side == "a") == v.k_first
        out[id(e)] = (setup, f"{side}_desc.load({at})" + (".T" if transpose else ""))
    return out


def wanted(sched: Schedule) -> bool:
    return bool(sched.get("TMA"))


def tunable(k: Kernel) -> bool:
    """Worth a try by the tuner: some operand qualifies and none would be transposed after its load."""
    ls = loads(k, 32)  # a qualifying operand has no batch, so the K step does not matter
    return bool(ls) and not any(code.endswith(".T") for _, code in ls.values())
