"""Triton backend: renders kernel IR with the templates in `render`, launches them from ModelNew."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hardware_models.spec import HardwareModel
from ir.kernel.ir import Buf, Kernel, KernelProgram, Reduce, walk

from ..base import Manifest
from ..exprs import pow2, row_coords, strided_reduction
from ..module import write_module
from . import render, scan, tma

MANIFEST = Manifest.load(Path(__file__).with_name("manifest.toml"))


def _strided(k: Kernel) -> bool:
    """A plain reduction along a non-contiguous axis that a chunk loop can fold."""
    reds = k.reductions()
    return all(r.op in ("sum", "max", "min", "prod") for r in reds) and not any(
        isinstance(x, Reduce) for r in reds for x in walk(r.body) if x is not r) and strided_reduction(k)


def _hopper(target: HardwareModel) -> bool:
    """TMA exists from sm_90 on."""
    arch = getattr(target, "arch", "") or ""
    return arch.startswith("sm_") and int("".join(ch for ch in arch[3:] if ch.isdigit()) or 0) >= 90


class TritonBackend:
    manifest = MANIFEST

    def default_schedule(self, k: Kernel, target: HardwareModel, executor: str) -> dict[str, Any]:
        interp = executor == "interpreter"  # the interpreter's cost is per program: use big tiles
        if k.kind == "pointwise":
            n = k.out.numel
            return {"BLOCK": min(pow2(n), 65536 if interp else 1024), "num_warps": 4}
        if k.kind == "reduce" and not interp and _strided(k):
            # the reduced axis is not the contiguous one (a sum over a middle axis): tall tiles of
            # neighbouring outputs, read along their contiguous axis, sweeping the reduction in chunks
            red = max(math.prod(v.extent for v in r.axes) for r in k.reductions())
            return {"BM": min(64, pow2(k.out.numel)), "BR": min(64, pow2(red)), "num_warps": 4}
        if k.kind == "reduce":
            red = max(math.prod(v.extent for v in r.axes) for r in k.reductions())
            # at least 16 lanes along the reduction on the GPU: first added when a 2-wide stacked sum was
            # wrong on the H100; the cause was negative // and % operands (fixed in render._Ctx, triton#7749),
            # and the floor stays until a GPU run shows dropping it changes nothing
            br = min(max(pow2(red), 1 if interp else 16), render.MAX_SINGLE_PASS)
            rows = k.out.numel
            bm = max(1, min(pow2(rows), (65536 if interp else 4096) // br)) if interp else max(1, min(16, 4096 // br))
            return {"BM": bm, "BR": br, "num_warps": 4 if br <= 1024 else 8}
        if k.kind == "rownorm":
            return self._row_schedule(k, interp)
        if k.kind == "scan":
            return scan.default_schedule(k, interp)
        M, N, K, _ = render.gemm_dims(k)
        if interp:
            return {"BM": min(pow2(max(M, 16)), 128), "BN": min(pow2(max(N, 16)), 128),
                    "BK": min(pow2(max(K, 16)), 128), "GROUP_M": 8, "num_warps": 4, "num_stages": 1}
        return {"BM": 128 if M >= 128 else max(16, pow2(M)), "BN": 128 if N >= 128 else max(16, pow2(N)),
                "BK": 32 if K >= 32 else 16, "GROUP_M": 8, "num_warps": 8 if M >= 128 and N >= 128 else 4,
                "num_stages": 3}

    @staticmethod
    def _row_schedule(k: Kernel, interp: bool) -> dict[str, Any]:
        # one tile spans the longest row (up to MAX_SINGLE_PASS) so the row is read once
        rows, cols = row_coords(k)
        longest = max([math.prod(v.extent for v in r.axes) for r in k.reductions()] + [math.prod(e for _, e in cols)])
        br = min(max(pow2(longest), 1 if interp else 16), render.MAX_SINGLE_PASS)
        bm = max(1, min(pow2(math.prod(v.extent for v in rows)), (65536 if interp else 2048) // br))
        return {"BM": bm, "BR": br, "num_warps": 4 if bm * br <= 2048 else 8 if bm * br <= 8192 else 16}

    def tuning_space(self, k: Kernel, target: HardwareModel) -> list[dict[str, Any]]:
        if k.kind == "pointwise":
            return [{"BLOCK": b, "num_warps": w} for b in (256, 512, 1024, 2048, 4096) for w in (2, 4, 8)]
        if k.kind == "reduce":
            red = max(math.prod(v.extent for v in r.axes) for r in k.reductions())
            br = min(pow2(red), render.MAX_SINGLE_PASS)
            tall = [{"BM": bm, "BR": c, "num_warps": w} for bm in (32, 64, 128) for c in (16, 32, 64)
                    for w in (4, 8)] if _strided(k) else []
            return tall + [{"BM": bm, "BR": br, "num_warps": w} for bm in (1, 2, 4, 8, 16) for w in (2, 4, 8)
                           if bm * br <= 32768]
        if k.kind == "scan":
            br = scan.default_schedule(k, False)["BR"]
            return [{"BM": bm, "BR": br, "num_warps": w} for bm in (1, 2, 4, 8, 16) for w in (2, 4, 8)
                    if bm * br <= 16384]
        if k.kind == "rownorm":
            br = self._row_schedule(k, False)["BR"]
            return [{"BM": bm, "BR": br, "num_warps": w} for bm in (1, 2, 4, 8, 16) for w in (4, 8, 16)
                    if bm * br <= 32768]
        space = [{"BM": bm, "BN": bn, "BK": bk, "GROUP_M": 8, "num_warps": w, "num_stages": s}
                 for bm in (32, 64, 128) for bn in (32, 64, 128, 256) for bk in (32, 64)
                 for w in (4, 8) for s in (2, 3, 4)]
        if _hopper(target) and tma.tunable(k):  # each schedule also with TMA descriptors
            space += [dict(s, TMA=True) for s in space]
        return space

    def render_kernel(self, k: Kernel, target: HardwareModel) -> str:
        return render.render_kernel(k, k.schedule)

    def launch(self, k: Kernel, ref: Callable[[Buf], str]) -> list[str]:
        s = k.schedule
        aligned = tma.operands(k) if tma.wanted(s) else {}
        args = ", ".join([f"_akg_aligned({ref(b)})" if b.name in aligned else ref(b) for b in k.inputs()]
                         + [k.out.name])
        opts = f"num_warps={s.get('num_warps', 4)}"
        if k.kind == "pointwise":
            return [f"{k.name}[(triton.cdiv({k.out.numel}, {s['BLOCK']}),)]({args}, BLOCK={s['BLOCK']}, {opts})"]
        if k.kind == "reduce":
            return [f"{k.name}[(triton.cdiv({k.out.numel}, {s['BM']}),)]({args}, BM={s['BM']}, BR={s['BR']}, {opts})"]
        if k.kind == "scan":
            rows = math.prod(v.extent for v in scan.scan_rows(k)[1])
            return [f"{k.name}[(triton.cdiv({rows}, {s['BM']}),)]({args}, BM={s['BM']}, BR={s['BR']}, {opts})"]
        if k.kind == "rownorm":
            grid = f"triton.cdiv({math.prod(v.extent for v in row_coords(k)[0])}, {s['BM']})"
            return [f"{k.name}[({grid},)]({args}, BM={s['BM']}, BR={s['BR']}, {opts})"]
        M, N, _, B = render.gemm_dims(k)
        grid = f"(triton.cdiv({M}, {s['BM']}) * triton.cdiv({N}, {s['BN']}), {B})"
        return [f"{k.name}[{grid}]({args}, BM={s['BM']}, BN={s['BN']}, BK={s['BK']}, GROUP_M={s['GROUP_M']}, "
                f"{opts}, num_stages={s.get('num_stages', 3)})"]

    def render_module(self, prog: KernelProgram, target: HardwareModel, header: str, meta: dict[str, Any],
                      weights: dict[str, Any]) -> str:
        sources = {k.name: self.render_kernel(k, target) for k in prog.kernels()}
        imports = ["import triton", "import triton.language as tl"]
        prelude = render.PRELUDE + (tma.ALLOCATOR if any(tma.wanted(k.schedule) for k in prog.kernels()) else "")
        return write_module(prog, meta, header, imports, prelude, sources, self.launch, weights)


BACKEND = TritonBackend()
