"""The cost model's order over a backend's tuning space: GEMM tiles sorted by estimated time,
infeasible ones (tiles that do not fit, spilling accumulators) pruned. Used by translate (the plan's
schedule), the tuner (the order it measures in), the coder's variants and `akg hw rank`."""

from __future__ import annotations

import math
from collections import Counter

from dsl_backends import Backend
from hardware_models.cost import Estimate, estimate_group, register_tile_rate
from hardware_models.spec import HardwareModel
from ir.kernel.ir import Kernel
from ir.kernel.schedule import Schedule
from ir.passes.fusion import Group


def estimated(grp: Group, target: HardwareModel, space: list[Schedule], backend: Backend
              ) -> list[tuple[Estimate, Schedule]]:
    """(estimate, schedule) for every schedule of `space` that names a tile (as `backend` reads its own
    schedules: `Backend.tiling`), in the space's order."""
    out = []
    for s in space:
        tiling = backend.tiling(s)
        if tiling is not None:
            out.append((estimate_group(grp, target, tiling), s))
    return out


def ranked_space(backend: Backend, k: Kernel, grp: Group | None, target: HardwareModel) -> list[Schedule]:
    """The backend's tuning space for one kernel; GEMM tiles ordered by the cost model, infeasible
    ones pruned. A CPU's register tiles go by the register model, spilling ones pruned; their cache
    blocks and thread counts keep the backend's order. Other spaces keep the backend's order."""
    space = backend.tuning_space(k, target)
    if k.kind == "matmul" and space and "MR" in space[0] and target.kind == "cpu":
        return _by_register_tile(space, target, backend.default_schedule(k, target))
    if k.kind != "matmul" or grp is None or not space or "BM" not in space[0]:
        return space
    scored = estimated(grp, target, space, backend)
    ranked = [s for e, s in sorted(scored, key=lambda x: _rank_key(*x)) if math.isfinite(e.time_s)]
    return _interleave(ranked)


def _by_register_tile(space: list[Schedule], target: HardwareModel, default: Schedule) -> list[Schedule]:
    """Register tiles by their modelled rate, then by FMAs per load (the same rate with fewer loads leaves
    the load ports to the packing and the epilogue); spilling tiles pruned. The tiles near the best rate
    take turns, each first with the default's cache blocks and threads, then one change from them, then
    two...: a small budget measures several tiles before it varies the blocks of one. The backend's own
    order put 2 x 8 tiles first, which cannot win."""
    lanes = int(target.chip("simd_width"))
    keyed: list[tuple[float, tuple[float, float], int, int, Schedule]] = []  # rate, tile key, changes, turn
    seen: Counter[tuple[int, int, int]] = Counter()  # (changes, MR, NR) -> schedules of that tile so far
    for s in space:
        mr, nr = s["MR"], s["NR"]
        rate = register_tile_rate(target, mr, nr)
        if rate <= 0:
            continue
        vecs = math.ceil(nr / lanes)
        changes = sum(s.get(key) != default.get(key) for key in (set(s) | set(default)) - {"MR", "NR"})
        keyed.append((rate, (-round(rate, 2), -mr * vecs / (mr + vecs)), changes, seen[(changes, mr, nr)], s))
        seen[(changes, mr, nr)] += 1
    if not keyed:
        return []
    near = NEAR_BEST * max(k[0] for k in keyed)
    top = sorted((k for k in keyed if k[0] >= near), key=lambda k: (k[2], k[3], k[1]))
    rest = sorted((k for k in keyed if k[0] < near), key=lambda k: (k[1], k[2]))
    return [k[-1] for k in top + rest]


NEAR_BEST = 0.9  # register tiles whose modelled rates are this close take turns in a tune's budget


def _interleave(ranked: list[Schedule]) -> list[Schedule]:
    """Schedules of different numerics (fp32 as fp32, 3xTF32) alternate, each family in its own order:
    the model's rates for them are datasheet figures, so a tuning budget measures both."""
    families: dict[str, list[Schedule]] = {}
    for s in ranked:
        families.setdefault(str(s.get("input_precision", "")), []).append(s)
    if len(families) < 2:
        return ranked
    out: list[Schedule] = []
    for i in range(max(len(f) for f in families.values())):
        out += [f[i] for f in families.values() if i < len(f)]
    return out


TIE = 0.05  # tensor-core estimates this close apart are the model's noise (a wave's tail), not a ranking
WIDE_TILE = 128 * 128  # tiles at least this large store a memory-bound GEMM's output alike (measured)


def _bucket(seconds: float) -> int:
    """Times within TIE of each other share a bucket: the model cannot tell them apart."""
    return math.floor(math.log(max(seconds, 1e-12)) / math.log(1 + TIE))


def _rank_key(e: Estimate, s: Schedule) -> tuple[float, ...]:
    """By estimated time; among ties (estimates within TIE) TMA last (it has not beaten pointer loads on
    our GEMMs), then: tensor-core tiles the deeper K step, three stages and the larger tile first (measured
    so on the H100 in bf16 and in 3xTF32, the README's Measured, "tile order and K-major B"); memory-bound
    tiles (a short K: the output's stores decide) the least compute first, whose slack hides it under the
    stores, then the larger tile, 128 rows before 64 and more warps (measured on KernelBench's tall-skinny
    GEMM, K = 32); where K takes several steps, the deeper step and three stages before those (the loads are
    what a memory-bound tile waits on: T5's 2048 -> 512 projection ran 61 us at BK=32 over two stages, 25
    at BK=64 over three on the H200, results/archive/h200-bf16-linear-schedules-2026-12-02-r4). FMA-bound
    tiles keep their order: BK=64 spills there."""
    if not math.isfinite(e.time_s):  # infeasible (pruned after sorting)
        return (math.inf, 0, 0, 0, 0, 0, 0, 0, math.inf)
    near, tma = _bucket(e.time_s), bool(s.get("TMA", False))
    # one K step: the space holds one of each; FMA tiles (no tensor unit timed) keep their order
    pipe = (-s.get("BK", 0), abs(s.get("num_stages", 3) - 3)) if any(
        key.startswith("tensor") for key in e.components) else (0, 0)
    if e.bound in ("dram", "l2"):
        comp = max((v for key, v in e.components.items() if key not in ("dram", "l2")), default=0.0)
        busy = round(comp / max(e.time_s - e.launch_s, 1e-12), 1)  # compute's share of the memory time
        return (near, tma, busy, *pipe, -min(s.get("BM", 0) * s.get("BN", 0), WIDE_TILE),
                -min(s.get("BM", 0), 128), -s.get("num_warps", 0), e.time_s)
    if not e.bound.startswith("tensor"):
        return (near, tma, 0, 0, 0, 0, 0, 0, e.time_s)
    return (near, tma, *pipe, -s.get("BM", 0) * s.get("BN", 0), 0, 0, 0, e.time_s)
