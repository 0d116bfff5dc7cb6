"""Metal backend: MSL from the shared C-style renderer and the SIMT layouts of simt.py (threadgroup
memory, SIMD-group shuffles; GEMMs on simdgroup matrices, simdgroup.py). On macOS the written module runs it through
PyObjC's Metal; elsewhere through akg's emulator: the MSL compiled as C++ against shim.h (installed as
<metal_stdlib>) and run on the CPU, each threadgroup as fibers so barriers and shuffles keep their meaning."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hardware_models.cost import Tiling
from hardware_models.spec import HardwareModel
from ir.kernel.ir import Kernel, KernelProgram, size_args
from ir.kernel.schedule import Schedule, Schedules
from ir.sym import c_syntax

from ..base import BackendBase, Frame, Manifest, Ref, Template, UnsupportedKernel, gpu_tiling
from ..cstyle import CStyle
from ..simt import Dialect, body_lines, launch_dims
from . import simdgroup
from .simdgroup import SCHEDULE as MMA_SCHEDULE
from .simdgroup import simdgroup_lines

HERE = Path(__file__).parent
MANIFEST = Manifest.load(HERE / "manifest.toml")
METAL = Dialect(shared="AKG_TG", sync="threadgroup_barrier(mem_flags::mem_threadgroup);", block="akg_tg",
                thread="akg_lid", block_dim="akg_tpg", grid_dim="akg_ngroups", lane_args=", akg_lid.x, akg_tpg.x")
PRECISE = {"exp", "log", "sin", "cos", "tanh", "pow", "sqrt", "atan2"}  # fast math is MSL's default elsewhere
OWN = {"erf": "akg_erf", "log1p": "akg_log1p", "expm1": "akg_expm1", "nearbyint": "metal::rint"}


class MetalStyle(CStyle):
    math_ns = "metal::"
    restrict = ""
    acc_float = "float"  # Apple GPUs have no double
    serial_acc_float = "float"

    def ctype(self, dt: str) -> str:
        if dt == "f64":
            raise UnsupportedKernel("float64: Apple GPUs have no double precision")
        return super().ctype(dt)

    def fn(self, name: str, t: str = "float") -> str:
        return OWN.get(name) or ("metal::precise::" + name if name in PRECISE else "metal::" + name)

    def nan(self, t: str) -> str:
        return "NAN"

    def inf(self, negative: bool, t: str) -> str:
        return "-INFINITY" if negative else "INFINITY"

    def int_limit(self, lowest: bool) -> str:
        return "(-9223372036854775807L - 1)" if lowest else "9223372036854775807L"


STYLE = MetalStyle()
POSITIONS = ("uint3 akg_tg [[threadgroup_position_in_grid]]", "uint3 akg_lid [[thread_position_in_threadgroup]]",
             "uint3 akg_tpg [[threads_per_threadgroup]]", "uint3 akg_ngroups [[threadgroups_per_grid]]")


def dims(k: Kernel, s: Schedule) -> tuple[tuple[int, int, int], int]:
    """The launch of `k`'s layout: threadgroups and threads (an analysis; nothing is rendered)."""
    return simdgroup.dims(k) if k.kind == "matmul" else launch_dims(k, s)


def render_kernel(k: Kernel, s: Schedule, target: HardwareModel | None = None) -> str:
    for b in [*k.inputs(), *k.outs()]:
        STYLE.ctype(b.dtype)  # refuses float64 before any text is made
    with c_syntax():  # run-time sizes (--dynamic) in C
        body = simdgroup_lines(k, STYLE, METAL) if k.kind == "matmul" else body_lines(k, s, STYLE, METAL)
    bufs = [f"device const {STYLE.ctype(b.dtype)}* {b.name} [[buffer({i})]]" for i, b in enumerate(k.inputs())]
    bufs += [f"device {STYLE.ctype(b.dtype)}* {'out' if b is k.out else b.name} [[buffer({len(bufs) + i})]]"
             for i, b in enumerate(k.outs())]
    sizes = size_args(k)
    if sizes:  # run-time sizes arrive in one buffer after the outputs
        bufs.append(f"constant int64_t* akg_sizes [[buffer({len(bufs)})]]")
        body = [f"    const int64_t {n} = akg_sizes[{i}];" for i, n in enumerate(sizes)] + body
    return "\n".join([f"kernel void {k.name}({', '.join(bufs + list(POSITIONS))}) {{", *body, "}"])


def emulator_harness(k: Kernel) -> str:
    """C++ that runs one kernel over its grid in the emulator: extern "C", called through ctypes."""
    args = [f"({'const ' if i < len(k.inputs()) else ''}{STYLE.ctype(b.dtype)}*)b[{i}]"
            for i, b in enumerate([*k.inputs(), *k.outs()])] + (["s"] if size_args(k) else [])
    return (f'extern "C" void akg_emu_{k.name}(void** b, unsigned gx, unsigned gy, unsigned gz, unsigned n, '
            'const int64_t* s) {\n'
            f"    akg_emu::grid(gx, gy, gz, n, [&](uint3 tg, unsigned lid) {{\n"
            f"        {k.name}({', '.join(args)}, tg, uint3{{lid, 0, 0}}, uint3{{n, 1, 1}}, uint3{{gx, gy, gz}});\n"
            "    });\n}")


def _launch(k: Kernel, schedule: Schedule, ref: Ref) -> list[str]:
    grid, threads = dims(k, schedule)
    args = ", ".join([ref(b) for b in k.inputs()] + [b.name for b in k.outs()])
    sizes = size_args(k)
    extra = f", [{', '.join(sizes)}]" if sizes else ""
    return [f"_akg_launch({k.name!r}, [{args}], {grid!r}, {threads}{extra})"]


def _groups(k: Kernel, target: HardwareModel) -> Schedule:
    return Schedule(THREADS=256)


def _groups_space(k: Kernel, target: HardwareModel) -> list[Schedule]:
    return [Schedule(THREADS=t) for t in (64, 128, 256, 512, 1024)]


def _grid_stride(k: Kernel, target: HardwareModel) -> Schedule:
    return Schedule(BLOCK=256)


def _grid_stride_space(k: Kernel, target: HardwareModel) -> list[Schedule]:
    return [Schedule(BLOCK=b) for b in (64, 128, 256, 512, 1024)]


TEMPLATES = {
    "pointwise": Template(render_kernel, _launch, _grid_stride, _grid_stride_space),
    "reduce": Template(render_kernel, _launch, _groups, _groups_space),
    "rownorm": Template(render_kernel, _launch, _groups, _groups_space),
    # one simdgroup-matrix layout so far
    "matmul": Template(render_kernel, _launch, lambda k, t: MMA_SCHEDULE, lambda k, t: [MMA_SCHEDULE]),
}


class MetalBackend(BackendBase):
    manifest = MANIFEST
    overrides = STYLE.overrides
    templates = TEMPLATES

    def tiling(self, s: Schedule) -> Tiling | None:
        """A SIMT GEMM: each thread a TM x TN tile of the block's (the warps its threads make), or its
        own warp count where the schedule names one (CUDA-C's WMMA)."""
        if "BM" not in s:
            return None
        return gpu_tiling(s, s.get("num_warps") or (s["BM"] // s.get("TM", 1)) * (s["BN"] // s.get("TN", 1)) // 32)

    def frame(self, prog: KernelProgram, schedules: Schedules, target: HardwareModel,
              sources: dict[str, str]) -> Frame:
        msl = (HERE / "prelude.metal").read_text() + "\n" + "\n\n".join(sources.values()) + "\n"
        harness = "\n\n".join(emulator_harness(k) for k in prog.kernels())
        return Frame([], f"_AKG_MSL = r'''{msl}'''\n_AKG_SHIM = r'''{(HERE / 'shim.h').read_text()}'''\n"
                     f"_AKG_HARNESS = r'''{harness}'''\n" + (HERE / "host.py.txt").read_text(), {})


BACKEND = MetalBackend()


def emulate(kernels: str, harness: str, workdir: Path) -> Any:
    """Compiles MSL (after akg's prelude) with the emulator's shim and returns the ctypes library: the
    same build the written module does, for tests of the shim itself."""
    import ctypes
    import subprocess

    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "metal_stdlib").write_text((HERE / "shim.h").read_text())
    text = ("#define AKG_EMULATED 1\n#define AKG_TG static thread_local\n" + (HERE / "prelude.metal").read_text()
            + "\n" + kernels + "\n" + harness)
    (workdir / "k.cpp").write_text(text)
    flags = ["-O2", "-std=c++17", "-fopenmp", "-shared", "-fPIC", "-Wno-attributes", "-U_FORTIFY_SOURCE"]
    r = subprocess.run(["g++", *flags, "-I", str(workdir), str(workdir / "k.cpp"), "-o", str(workdir / "k.so")],
                       capture_output=True, text=True)
    if r.returncode:
        raise UnsupportedKernel("the emulator could not compile: " + r.stderr[-1500:])
    return ctypes.CDLL(str(workdir / "k.so"))
