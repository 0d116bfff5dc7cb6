"""Triton backend: renders kernel IR with the templates in `render`, launches them from ModelNew."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

from hardware_models.spec import HardwareModel
from ir.kernel.analysis import gemm_dims, split_gemm
from ir.kernel.ir import Kernel, KernelProgram, Reduce, size_args, walk
from ir.kernel.schedule import Schedule, Schedules

from ..base import BackendBase, Frame, Manifest, Ref, Requires, Template
from ..exprs import fold_grid, pow2, row_count, row_longest, strided_reduction
from . import flash, ops, render, scan, tma

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


def _red_extent(k: Kernel) -> int:
    return max(math.prod(v.extent for v in r.axes) for r in k.reductions())


def _opts(s: Schedule) -> str:
    return f"num_warps={s.get('num_warps', 4)}"


def _args(k: Kernel, s: Schedule, ref: Ref) -> str:
    aligned = tma.operands(k, s.get("BK", 32)) if tma.wanted(s) else {}
    return ", ".join([f"_akg_aligned({ref(b)})" if b.name in aligned else ref(b) for b in k.inputs()]
                     + [b.name for b in k.outs()] + [*size_args(k)])


def _rows_launch(rows: Callable[[Kernel], int]) -> Callable[[Kernel, Schedule, Ref], list[str]]:
    """A launch over BM rows per program, for the templates that tile rows x BR."""
    def launch(k: Kernel, s: Schedule, ref: Ref) -> list[str]:
        return [f"{k.name}[(triton.cdiv({rows(k)}, {s['BM']}),)]({_args(k, s, ref)}, BM={s['BM']}, BR={s['BR']}, "
                f"{_opts(s)})"]
    return launch


# --- pointwise
def flat_default(k: Kernel, target: HardwareModel) -> Schedule:
    """A flat block of the output's elements (Pallas' pointwise schedule too)."""
    return Schedule(BLOCK=min(pow2(k.out.numel), 1024), num_warps=4)


def flat_space(k: Kernel, target: HardwareModel) -> list[Schedule]:
    return [Schedule(BLOCK=b, num_warps=w) for b in (256, 512, 1024, 2048, 4096) for w in (2, 4, 8)]


def _pointwise_default(k: Kernel, target: HardwareModel) -> Schedule:
    if render.transposing(k) is not None:  # a [y, x] tile: 64 x 64 over 4 warps, as inductor's 2-D tiles
        return Schedule(YBLOCK=64, XBLOCK=64, num_warps=4)
    return flat_default(k, target)


def _pointwise_space(k: Kernel, target: HardwareModel) -> list[Schedule]:
    flat = flat_space(k, target)
    if render.transposing(k) is None:
        return flat
    return [Schedule(YBLOCK=y, XBLOCK=x, num_warps=w) for y in (32, 64, 128) for x in (32, 64, 128)
            for w in (4, 8) if y * x >= 1024 * w // 4] + flat


def _pointwise_launch(k: Kernel, s: Schedule, ref: Ref) -> list[str]:
    yx = render.transposing(k) if "YBLOCK" in s else None
    if yx is not None:
        y, x = yx
        rest = math.prod(v.extent for v in k.coords if v not in yx)
        grid = f"{rest} * triton.cdiv({y.extent}, {s['YBLOCK']}) * triton.cdiv({x.extent}, {s['XBLOCK']})"
        return [f"{k.name}[({grid},)]({_args(k, s, ref)}, YBLOCK={s['YBLOCK']}, XBLOCK={s['XBLOCK']}, "
                f"{_opts(s)})"]
    return [f"{k.name}[(triton.cdiv({k.out.numel}, {s['BLOCK']}),)]({_args(k, s, ref)}, BLOCK={s['BLOCK']}, "
            f"{_opts(s)})"]


# --- reductions
def _reduce_default(k: Kernel, target: HardwareModel) -> Schedule:
    red = _red_extent(k)
    if _strided(k):
        # the reduced axis is not the contiguous one (a sum over a middle axis): tall tiles of
        # neighbouring outputs, read along their contiguous axis, sweeping the reduction in chunks.
        # 128 x 64 over 8 warps read a bf16 [1024]^3 column sum at torch's pace on the H200 with the
        # loads' masks (516 us, torch 504); 64 x 64 over 4 lost 16% to them (docs/measured.md, 2026-12-01)
        return Schedule(BM=min(128, pow2(k.out.numel)), BR=min(64, pow2(red)), num_warps=8)
    # at least 16 lanes along the reduction on the GPU: first added when a 2-wide stacked sum was
    # wrong on the H100; the cause was negative // and % operands (fixed in ops.Ctx, triton#7749),
    # and the floor stays until a GPU run shows dropping it changes nothing
    br = min(max(pow2(red), 16), ops.MAX_SINGLE_PASS)
    bm = max(1, min(16, 4096 // br))
    return Schedule(BM=bm, BR=br, num_warps=4 if br <= 1024 else 8)


def _reduce_space(k: Kernel, target: HardwareModel) -> list[Schedule]:
    br = min(pow2(_red_extent(k)), ops.MAX_SINGLE_PASS)
    tall = [Schedule(BM=bm, BR=c, num_warps=w) for bm in (32, 64, 128) for c in (16, 32, 64)
            for w in (4, 8)] if _strided(k) else []
    return tall + [Schedule(BM=bm, BR=br, num_warps=w) for bm in (1, 2, 4, 8, 16) for w in (2, 4, 8)
                   if bm * br <= 32768]


# --- row-fused normalisations
def _row_default(k: Kernel, target: HardwareModel) -> Schedule:
    # one tile spans the longest row (up to MAX_SINGLE_PASS) so the row is read once
    br = min(max(pow2(row_longest(k)), 16), ops.MAX_SINGLE_PASS)
    bm = max(1, min(pow2(row_count(k)), 2048 // br))
    return Schedule(BM=bm, BR=br, num_warps=4 if bm * br <= 2048 else 8 if bm * br <= 8192 else 16)


def _row_space(k: Kernel, target: HardwareModel) -> list[Schedule]:
    br = _row_default(k, target)["BR"]
    return [Schedule(BM=bm, BR=br, num_warps=w) for bm in (1, 2, 4, 8, 16) for w in (4, 8, 16)
            if bm * br <= 32768]


# --- scans
def _scan_default(k: Kernel, target: HardwareModel) -> Schedule:
    return scan.default_schedule(k)


def _scan_space(k: Kernel, target: HardwareModel) -> list[Schedule]:
    br = scan.default_schedule(k)["BR"]
    return [Schedule(BM=bm, BR=br, num_warps=w) for bm in (1, 2, 4, 8, 16) for w in (2, 4, 8) if bm * br <= 16384]


# --- GEMMs
def _matmul_default(k: Kernel, target: HardwareModel) -> Schedule:
    M, N, K, _ = gemm_dims(k)
    return Schedule(BM=128 if M >= 128 else max(16, pow2(M)), BN=128 if N >= 128 else max(16, pow2(N)),
                    BK=32 if K >= 32 else 16, GROUP_M=8, num_warps=8 if M >= 128 and N >= 128 else 4, num_stages=3)


def _matmul_space(k: Kernel, target: HardwareModel) -> list[Schedule]:
    M, N, K, _ = gemm_dims(k)
    # a K step wider than K only pads; where one step covers K, pipeline stages have nothing to overlap
    steps = [bk for bk in (32, 64) if bk == 32 or K > 32]
    # a tile wider than its padded dimension only multiplies zeros (attention's P @ V over 64 columns)
    space = [Schedule(BM=bm, BN=bn, BK=bk, GROUP_M=8, num_warps=w, num_stages=s)
             for bm in (32, 64, 128) if bm <= max(32, pow2(M))
             for bn in (32, 64, 128, 256) if bn <= max(32, pow2(N)) for bk in steps
             for w in (4, 8) for s in ((2, 3, 4) if K > bk else (2,))]
    if _split_precision(k, target):  # 3xTF32: tensor cores at fp32 accuracy, which the verifier checks
        space += [s.replace(input_precision="tf32x3") for s in space if _split_tile_fits(s, target)]
    if _hopper(target) and tma.tunable(k):  # schedules also with TMA descriptors
        # not for fp32 operands on the FMA path: measured 40-50x slower than pointer loads (README, Measured)
        parts = split_gemm(k)
        plain_f32 = "f32" in (parts.a.dtype, parts.b.dtype)  # either operand fp32: the dot runs on FMAs
        space += [s.replace(TMA=True) for s in space if not (plain_f32 and "input_precision" not in s)]
    return space


def _split_tile_fits(s: Schedule, target: HardwareModel) -> bool:
    """On Hopper a warpgroup (4 warps) issues 64-row MMAs: a 3xTF32 tile of 8 warps and 64 rows splits
    its columns instead and ran 1.6-2x slower than 128 rows or 4 warps on the H200 (GPT-2's GEMMs,
    results/archive/h200-tune-gemm-gpt2-2026-11-30)."""
    return not (_hopper(target) and s["num_warps"] >= 8 and s["BM"] < 16 * s["num_warps"])


def _split_precision(k: Kernel, target: HardwareModel) -> bool:
    """fp32 operands on an NVIDIA chip with TF32 tensor cores."""
    parts = split_gemm(k)
    return (target.vendor == "nvidia" and bool(target.peak("tensor", "tf32"))
            and parts.a.dtype == "f32" and parts.b.dtype == "f32")


def _matmul_launch(k: Kernel, s: Schedule, ref: Ref) -> list[str]:
    M, N, _, B = gemm_dims(k)
    tiles = f"triton.cdiv({M}, {s['BM']}) * triton.cdiv({N}, {s['BN']})"
    grid = f"({tiles} * {B},)" if fold_grid(s, B) else f"({tiles}, {B})"
    return [f"{k.name}[{grid}]({_args(k, s, ref)}, BM={s['BM']}, BN={s['BN']}, BK={s['BK']}, "
            f"GROUP_M={s['GROUP_M']}, {_opts(s)}, num_stages={s.get('num_stages', 3)})"]


def _render(fn: Callable[[Kernel, Schedule], str]) -> Callable[[Kernel, Schedule, HardwareModel], str]:
    return lambda k, s, target: fn(k, s)


TEMPLATES = {
    "pointwise": Template(_render(render.pointwise), _pointwise_launch, _pointwise_default, _pointwise_space),
    "reduce": Template(_render(render.reduction), _rows_launch(lambda k: k.out.numel), _reduce_default,
                       _reduce_space),
    "rownorm": Template(_render(render.rownorm),
                        _rows_launch(row_count), _row_default,
                        _row_space),
    "scan": Template(_render(scan.render_scan),
                     _rows_launch(lambda k: math.prod(v.extent for v in scan.scan_rows(k)[1])), _scan_default,
                     _scan_space),
    "matmul": Template(_render(render.matmul), _matmul_launch, _matmul_default, _matmul_space),
    "attention": Template(_render(flash.render), flash.launch, flash.default_schedule, flash.space),
}


class TritonBackend(BackendBase):
    manifest = MANIFEST
    overrides = ops.OVERRIDES
    templates = TEMPLATES

    def frame(self, prog: KernelProgram, schedules: Schedules, target: HardwareModel,
              sources: dict[str, str]) -> Frame:
        tma_used = any(tma.wanted(schedules[k.name]) for k in prog.kernels())
        split = any(schedules[k.name].get("input_precision") == "tf32x3" for k in prog.kernels())
        requires = (Requires((9, 0), "TMA descriptors") if tma_used else
                    Requires((8, 0), "TF32 tensor cores for 3xTF32") if split else None)
        return Frame(["import triton", "import triton.language as tl"],
                     ops.PRELUDE + (tma.ALLOCATOR if tma_used else ""), sources, requires)


BACKEND = TritonBackend()
