"""Cost model: roofline time of a kernel group under a schedule (bytes per memory level, FLOPs per
unit, occupancy, waves and tail effect, launch overhead), and speed-of-light time of a program."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from ir.graph import Graph, Node
from ir.ops import opdef
from ir.passes.fusion import Group, fuse

from .counting import SOURCES, Key, compulsory_bytes, flops, program_bytes
from .spec import HardwareModel

NUMERICS = ("reference", "strict", "tf32", "tf32x3")
# tensor-core products per fp32 multiply-add where a contraction splits its operands (3xTF32: hi*hi,
# hi*lo, lo*hi), which the verifier shows fp32-accurate against float64
SPLIT_PRODUCTS = {"tf32x3": 3}
MEM_PARALLELISM = 4.0  # a single unit can pull about this many times its fair share of DRAM bandwidth
ACC_REG_OVERHEAD = 32  # registers a GEMM thread needs beyond its accumulators (addresses, operands)
MIN_ELEMS_PER_WARP = 512  # output elements per warp below which tensor-core issue slots go idle


@dataclass(frozen=True)
class Tiling:
    """What the cost model reads of a schedule: tile sizes (M, N, K for contractions; elements per
    program otherwise) and launch shape."""

    block: tuple[int, ...] = (128, 128, 32)
    num_warps: int = 4
    num_stages: int = 3
    vector_width: int = 4
    precision: str = ""  # a split-precision contraction ("tf32x3"); "" is the numerics policy's
    group_m: int = 1  # rows of tiles the launch order runs together (Triton's GROUP_M): their panels shared in L2

    def describe(self) -> str:
        extra = f" {self.precision}" if self.precision else ""
        return f"block={'x'.join(map(str, self.block))} warps={self.num_warps} stages={self.num_stages}{extra}"


def default_schedule(target: HardwareModel) -> Tiling:
    """GPUs: a 128x128 tile over 4 warps; CPUs: a cache-sized tile per core (one thread, no pipelining)."""
    if target.kind == "cpu":
        return Tiling(block=(64, 64, 32), num_warps=1, num_stages=1)
    return Tiling()


def resolve_unit(target: HardwareModel, kind: str, dtype: str, op_hint: str, numerics: str) -> tuple[str, str]:
    """Which unit and rate dtype runs this work on `target` under the numerics policy."""
    if kind == "vector":
        dt = dtype if target.peak("vector", dtype) else "f32"
        return "vector", dt
    if dtype == "f32":
        mode = {"strict": "f32", "tf32": "tf32", "tf32x3": "tf32"}.get(numerics) or target.numerics.get(
            "conv_f32" if op_hint == "conv" else "matmul_f32", "f32")
        if mode == "tf32" and target.peak("tensor", "tf32"):
            return "tensor", "tf32"
        return ("tensor", "f32") if target.peak("tensor", "f32") else ("vector", "f32")
    if target.peak("tensor", dtype):
        return "tensor", dtype
    return "vector", dtype if target.peak("vector", dtype) else "f32"


def unit_work(nodes: list[Node], target: HardwareModel, numerics: str,
              split_fp32: bool = False) -> Counter[tuple[str, str]]:
    """FLOPs per (unit, rate dtype) on the target. `split_fp32`: an fp32 contraction the numerics keep
    in fp32 may instead run as 3xTF32 on matrix units, wherever that is faster (the verifier admits it
    as fp32-accurate), as a speed-of-light must allow."""
    work: Counter[tuple[str, str]] = Counter()
    split = SPLIT_PRODUCTS["tf32x3"]
    tf32 = target.peak("tensor", "tf32")
    for n in nodes:
        hint = "conv" if n.op in ("conv", "conv_transpose") else "matmul"
        for (kind, dt), f in flops([n]).items():
            unit = resolve_unit(target, kind, dt, hint, numerics)
            mult = SPLIT_PRODUCTS.get(numerics, 1) if unit == ("tensor", "tf32") else 1
            if (split_fp32 and tf32 and kind == "contraction" and dt == "f32" and unit[1] == "f32"
                    and split / tf32 < 1 / (target.peak(*unit) or target.peak("vector", "f32") or tf32)):
                unit, mult = ("tensor", "tf32"), split
            work[unit] += f * mult
    return work


def compute_time(work: Counter[tuple[str, str]], target: HardwareModel) -> dict[str, float]:
    return {f"{u}.{dt}": f / (target.peak(u, dt) or target.peak("vector", "f32") or 1.0)
            for (u, dt), f in work.items() if f}


@dataclass
class Estimate:
    time_s: float
    bound: str
    components: dict[str, float]  # seconds per resource
    flops: dict[str, float]
    bytes: dict[str, float]  # per memory level
    occupancy: float = 1.0
    waves: int = 1
    tail_efficiency: float = 1.0
    launch_s: float = 0.0
    schedule: str = ""

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _gemm_dims(anchor: Node) -> tuple[int, int, int]:
    a, w = anchor.args[0], anchor.args[1]
    assert a is not None and w is not None
    out = anchor.shape
    if anchor.op == "matmul":
        return max(1, anchor.type.numel // max(out[-1], 1)), out[-1], a.shape[-1]
    if anchor.op == "linear":
        return max(1, anchor.type.numel // max(out[-1], 1)), w.shape[0], w.shape[1]
    groups = anchor.attrs.get("groups", 1)
    kvol = math.prod(w.shape[2:])
    cout = out[-1] if anchor.attrs.get("channels_last") else out[1]
    if anchor.op == "conv":  # implicit GEMM: (N * output pixels) x Cout x (Cin/groups * kernel)
        return anchor.type.numel // cout, cout, w.shape[1] * kvol
    return anchor.type.numel // cout, cout, (w.shape[0] // groups) * kvol // max(
        1, math.prod(anchor.attrs["stride"]))


def register_tile_rate(target: HardwareModel, mr: int, nr: int) -> float:
    """The fraction of a CPU core's FMA peak an MR x NR fp32 register tile can reach in its inner loop, 0
    where its accumulators, a row of B vectors and one broadcast A value do not fit the vector registers
    (it spills). Each k-step issues MR x NR/lanes FMAs and loads NR/lanes B vectors and MR A broadcasts;
    it takes at least the FMA pipes' time, the load ports' time and one FMA latency (each accumulator's
    chain). A thin tile (2 x 8 on AVX2: 2 FMAs, 3 loads, 4 cycles) reaches a quarter of what 6 x 16 does."""
    lanes = int(target.chip("simd_width"))
    vecs = math.ceil(nr / lanes)
    if mr * vecs + vecs + 1 > int(target.chip("vector_registers")):
        return 0.0
    cycles = max(mr * vecs / target.chip("fma_units"), (mr + vecs) / target.chip("load_units"),
                 target.chip("fma_latency_cycles"))
    return mr * nr / lanes / target.chip("fma_units") / cycles


def _occupancy(target: HardwareModel, threads: int, local_bytes: int, regs_per_thread: int) -> tuple[int, float]:
    limits = [int(target.chip("max_groups_per_unit")),
              int(target.chip("max_threads_per_unit")) // max(threads, 1)]
    if local_bytes:
        limits.append(int(target.chip("local_mem_per_unit_bytes")) // local_bytes)
    limits.append(int(target.chip("registers_per_unit")) // max(regs_per_thread * threads, 1))
    per_unit = max(0, min(limits))
    return per_unit, per_unit * threads / target.chip("max_threads_per_unit")


def estimate_group(group: Group, target: HardwareModel, schedule: Tiling | None = None,
                   numerics: str = "reference") -> Estimate:
    """Roofline estimate of one kernel: max(compute, DRAM, L2, local memory) over the busy units,
    stretched by the tail of the last wave, plus launch overhead."""
    sched = schedule or default_schedule(target)
    nodes = [n for n in group.nodes if n.op not in SOURCES]
    if sched.precision and target.peak("tensor", "tf32"):
        numerics = sched.precision
    work = unit_work(nodes, target, numerics)
    times = compute_time(work, target)
    read, written = compulsory_bytes(nodes, group.outputs)
    dram = float(read + written)
    l2 = dram
    local_bytes = 0
    warp = int(target.chip("simd_width")) if target.kind == "gpu" else 1
    threads = sched.num_warps * warp
    anchor = group.anchor
    serial = False
    if anchor is not None and opdef(anchor.op).group == "contraction":
        m, n, k = _gemm_dims(anchor)
        bm, bn, bk = (list(sched.block) + [32, 32, 32])[:3]
        x, w = anchor.args[0], anchor.args[1]
        assert x is not None and w is not None
        item = x.type.itemsize
        # each tile streams an A panel and a B panel through L2 (for a convolution A is the input
        # itself, never an im2col copy). Tiles run along N first, so an A panel is reused while it
        # is hot; B is re-read by every row of tiles and comes from DRAM again where it misses L2.
        # A launch order that runs `group_m` rows of tiles together (Triton's GROUP_M) shares each B
        # panel between them: B is re-read once per group, while the group's A panels stay in L2
        # (the model without it put an 8192^3 bf16 GEMM at DRAM bound, and its tie-breaks then chose
        # a tile measured at half the speed of the best: docs/measured.md, 2026-12-01).
        a_bytes = m * k * item if anchor.op in ("matmul", "linear") else x.type.nbytes
        b_bytes = w.type.nbytes if anchor.op != "matmul" else k * n * item
        row_tiles, col_tiles = math.ceil(m / bm), math.ceil(n / bn)
        l2 = max(l2, float(a_bytes * col_tiles + b_bytes * row_tiles))
        half_l2 = target.chip("l2_bytes") / 2
        group = max(1, min(sched.group_m, row_tiles))
        a_panel = a_bytes / row_tiles * group
        miss_a = max(0.0, 1 - half_l2 / a_panel) if a_panel else 0.0
        miss_b = max(0.0, 1 - half_l2 / b_bytes) if b_bytes else 0.0
        dram += a_bytes * (col_tiles - 1) * miss_a + b_bytes * (math.ceil(row_tiles / group) - 1) * miss_b
        local_bytes = sched.num_stages * (bm + bn) * bk * item
        regs = min(255, 32 + (bm * bn) // max(threads, 1))
        # shared-memory roofline inside a unit: small tiles cannot feed the tensor cores
        per_unit_peak = sum(target.peak(u, d) or 0 for (u, d) in work if u == "tensor") / target.units
        local_bw = target.fig("memory", "local_bw_per_unit")
        if per_unit_peak and local_bw is not None:
            step_compute = 2.0 * bm * bn * bk / per_unit_peak
            step_local = (bm + bn) * bk * item / local_bw.value
            if step_local > step_compute:
                for key in [t for t in times if t.startswith("tensor.")]:
                    times[key] *= step_local / step_compute
        # without tensor cores (fp32 kept fp32) every FMA's operands come from shared memory into
        # a thread's register tile: t x t outputs need 2t loads per k-step, so small tiles starve
        vec_peak = sum(target.peak(u, d) or 0 for (u, d) in work if u == "vector") / target.units
        if not per_unit_peak and vec_peak and local_bw is not None and target.kind == "gpu":
            side = math.sqrt(bm * bn / max(threads, 1))  # a thread's register tile is side x side
            step_compute = 2.0 * bm * bn * bk / vec_peak
            step_local = threads * 2 * side * bk * item / local_bw.value
            if step_local > step_compute:
                for key in [t for t in times if t.startswith("vector.")]:
                    times[key] *= step_local / step_compute
        serial = sched.num_stages == 1  # no overlap of loads and math
        # an fp32 accumulator tile that does not fit the 255 registers a thread may hold spills to
        # local memory on every k-step: such a schedule is not worth running
        if (bm * bn) // max(threads, 1) + ACC_REG_OVERHEAD > 255 and target.kind == "gpu":
            return Estimate(math.inf, "infeasible: accumulator spills registers", {}, {}, {}, 0.0, 0, 0.0, 0.0,
                            sched.describe())
        # each warp needs enough of the tile to keep its tensor-core instructions busy
        # (Hopper's wgmma works on 64-row slabs per warpgroup)
        per_warp = bm * bn / max(sched.num_warps, 1)
        tile_eff = min(1.0, per_warp / MIN_ELEMS_PER_WARP)
        if target.arch.startswith("sm_90") and bm < 64:
            tile_eff *= 0.5  # no wgmma below 64 rows: the older mma path runs at about half rate
        for key in [t for t in times if t.startswith("tensor.")]:
            times[key] /= tile_eff
    else:
        out_elems = max((o.type.numel for o in group.outputs), default=1)
        per_program = max(1, sched.block[0])
        tiles = math.ceil(out_elems / per_program)
        regs = 32 + per_program // max(threads, 1)
    per_unit, occupancy = _occupancy(target, threads, local_bytes, min(regs, 255))
    if per_unit == 0:
        return Estimate(math.inf, "infeasible: tile does not fit one unit", {}, {}, {}, 0.0, 0, 0.0, 0.0,
                        sched.describe())
    if anchor is not None and opdef(anchor.op).group == "contraction":
        tiles = row_tiles * col_tiles
    slots = per_unit * target.units
    waves = max(1, math.ceil(tiles / slots))
    tail = tiles / (waves * slots)
    # programs resident together on one unit share its compute: what counts for compute is how evenly the
    # tiles cover the units (64 tiles on 132 SMs leave half idle however many fit on one; 128 tiles of a
    # smaller tile, two per SM in the slot count, in fact run one per SM on 128: 1.3x faster, measured)
    unit_tail = tiles / (math.ceil(tiles / target.units) * target.units)
    # compute scales with the busy units; one unit can draw several times its share of bandwidth;
    # too few resident warps leave latency exposed (Little's law: about 8 warps per unit)
    latency_eff = min(1.0, per_unit * sched.num_warps / 8) if target.kind == "gpu" else 1.0
    mem_share = min(1.0, MEM_PARALLELISM * tail)
    times["dram"] = dram / target.dram_bw / mem_share
    if target.l2_bw:
        times["l2"] = l2 / target.l2_bw / mem_share
    for key in [t for t in times if t not in ("dram", "l2")]:
        times[key] /= unit_tail * latency_eff
    mem = max(times.get("dram", 0.0), times.get("l2", 0.0))
    comp = max((v for key, v in times.items() if key not in ("dram", "l2")), default=0.0)
    body = comp + mem if serial else max(comp, mem)
    launch = target.launch_overhead
    bound = max(times, key=lambda key: times[key]) if times else "launch"
    if launch > body:
        bound = "launch"
    return Estimate(body + launch, bound, times, {f"{u}.{d}": f for (u, d), f in work.items()},
                    {"dram": dram, "l2": l2, "local": float(local_bytes)}, occupancy, waves, tail, launch,
                    sched.describe())


@dataclass
class SolReport:
    sol_s: float
    bound: str  # "memory" or "compute"
    bytes: int
    flops: float
    components: dict[str, float] = field(default_factory=dict)
    flops_by_unit: dict[str, float] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"sol_ms": self.sol_s * 1e3, "bound": self.bound, "bytes": self.bytes, "flops": self.flops,
                "components_ms": {k: v * 1e3 for k, v in self.components.items()},
                "flops_by_unit": self.flops_by_unit}


def speed_of_light(g: Graph, target: HardwareModel, numerics: str = "reference") -> SolReport:
    """The time no implementation can beat: compulsory DRAM traffic (inputs and weights read once,
    outputs written once) against the FLOPs on their fastest legal unit, whichever is longer (an fp32
    contraction's fastest legal unit under the reference numerics may be the matrix units, split three ways)."""
    nodes = [n for n in g.nodes if n.op not in SOURCES]
    work = unit_work(nodes, target, numerics, split_fp32=numerics == "reference")
    comps = compute_time(work, target)
    read, written = program_bytes(g)
    comps["dram"] = (read + written) / target.dram_bw
    key = max(comps, key=lambda k: comps[k])
    return SolReport(comps[key], "memory" if key == "dram" else "compute", read + written,
                     float(sum(work.values())), comps, {f"{u}.{d}": f for (u, d), f in work.items()})


@dataclass(frozen=True)
class LibraryChoice:
    """A GEMM group's estimate written by the backend and left to the library (seconds)."""

    generated_s: float
    library_s: float


def gemm_library_choice(group: Group, target: HardwareModel, generated_efficiency: float,
                        replayed: bool = False) -> LibraryChoice | None:
    """A GEMM group (matmul or linear anchor) generated against left to the library, where the target
    states how near its library GEMM comes to the compute peak (`library.gemm_<dtype>`) and the backend
    how near its own does: compute scaled by each, memory as the roofline has it (a skinny GEMM streams
    its weights either way). The library's output goes through memory once more to reach the generated
    epilogue, and each call pays torch's dispatch (`replayed`: a launch, in a CUDA graph). None where either
    efficiency is unknown."""
    anchor = group.anchor
    eff = target.fig("library", f"gemm_{anchor.type.dtype}") if anchor is not None else None
    if anchor is None or anchor.op not in ("matmul", "linear") or eff is None or generated_efficiency <= 0:
        return None
    epilogue = any(n is not anchor and n.op not in SOURCES and opdef(n.op).group != "movement" for n in group.nodes)
    # the library's output goes through memory once more to reach the generated epilogue's own kernel
    return library_choice(group, target, generated_efficiency, eff.value,
                          2 * anchor.type.nbytes / target.dram_bw if epilogue else None, replayed)


def library_choice(group: Group, target: HardwareModel, generated_efficiency: float, library_efficiency: float,
                   epilogue_s: float | None = None, replayed: bool = False) -> LibraryChoice | None:
    """A group's compute priced at each side's efficiency, memory as the roofline has it, plus a launch for the
    generated kernel and torch's dispatch for the library's call (and, with `epilogue_s`, a kernel of that
    time after it). `replayed`: the module runs as a CUDA graph, whose replay launches the library's kernel
    with no host dispatch: a launch, as a generated kernel's. None where the estimate is not finite."""
    e = estimate_group(group, target)
    if not math.isfinite(e.time_s):
        return None
    comp = max((v for k, v in e.components.items() if k not in ("dram", "l2")), default=0.0)
    mem = max(e.components.get("dram", 0.0), e.components.get("l2", 0.0))
    call = target.fig("library", "call_s")
    generated = max(comp / generated_efficiency, mem) + e.launch_s
    library = max(comp / library_efficiency, mem) + (call.value if call is not None and not replayed else e.launch_s)
    if epilogue_s is not None:
        library += epilogue_s + e.launch_s
    return LibraryChoice(generated, library)


def estimate_program(g: Graph, target: HardwareModel, numerics: str = "reference") -> tuple[float, list[Estimate]]:
    """Sum of per-kernel estimates for the fusion plan, with default schedules."""
    ests = [estimate_group(grp, target, numerics=numerics) for grp in fuse(g).groups]
    return sum(e.time_s for e in ests), ests


__all__ = ["Tiling", "Estimate", "SolReport", "LibraryChoice", "estimate_group", "gemm_library_choice",
           "library_choice", "speed_of_light", "estimate_program", "resolve_unit", "Key"]
