"""CUDA-C backend: the C-style renderer base with CUDA's qualifiers, and the SIMT layouts of simt.py:
grid-stride pointwise loops; a thread block per reduced output (per-thread partials, then warp shuffles
and shared memory); shared-memory tiled GEMMs with a register tile per thread and the epilogue fused.
Kernels take raw pointers and torch's current stream; the written module builds them through torch's C++
extension loader (the kernels as written plus pybind11 launchers, cached by a hash of source, flags and
arch), or with nvcc alone into a shared library called through ctypes (AKG_CUDA_LOADER=ctypes)."""

from __future__ import annotations

import hashlib
import math
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterable
from pathlib import Path

from hardware_models.cost import Tiling
from hardware_models.spec import HardwareModel
from ir.errors import AkgError
from ir.kernel.ir import Kernel, KernelProgram, size_args
from ir.kernel.schedule import Schedule, Schedules
from ir.sym import c_syntax

from ..base import BackendBase, Frame, Manifest, Ref, Requires, Template, gpu_tiling
from ..cstyle import CStyle
from ..exprs import row_coords
from ..simt import KEEP_PER_SWEEP, Dialect, body_lines, launch_dims
from . import vector, wmma
from .templates import BUILD, PRELUDE_CU
from .vector import vector_lines
from .wmma import wmma_lines

MANIFEST = Manifest.load(Path(__file__).with_name("manifest.toml"))
NVCC_FLAGS = ["-O3", "--expt-relaxed-constexpr", "-std=c++17", "-Xcompiler", "-fPIC"]


class CudaStyle(CStyle):
    math_ns = ""  # CUDA's overloaded device math (exp(float) is the float version)
    restrict = "__restrict__"
    acc_float = "float"  # a block-wide tree reduction keeps float's error small


STYLE = CudaStyle()


CUDA = Dialect(shared="__shared__", sync="__syncthreads();", block="blockIdx", thread="threadIdx",
               block_dim="blockDim", grid_dim="gridDim")


def _params(k: Kernel) -> list[str]:
    ins = [f"const {STYLE.ctype(b.dtype)}* {STYLE.restrict} {b.name}" for b in k.inputs()]
    outs = [f"{STYLE.ctype(k.out.dtype)}* {STYLE.restrict} out"] + [
        f"{STYLE.ctype(b.dtype)}* {STYLE.restrict} {b.name}" for b, _ in k.also]
    return ins + outs + [f"const int64_t {n}" for n in size_args(k)]


def dims(k: Kernel, s: Schedule) -> tuple[tuple[int, int, int], int]:
    """The launch of `k`'s layout: groups and threads (an analysis; nothing is rendered)."""
    if wmma.eligible(k):
        return wmma.dims(k, s)
    (gx, gy, gz), threads = launch_dims(k, s)
    if vector.eligible(k):  # 16 bytes of its narrowest operand per thread
        gx = max(1, -(-gx // vector.width(k)))
    return (gx, gy, gz), threads


def render_kernel(k: Kernel, s: Schedule, target: HardwareModel | None = None) -> str:
    with c_syntax():  # run-time sizes (--dynamic) in C
        return _render_kernel(k, s)


def _render_kernel(k: Kernel, s: Schedule) -> str:
    # tensor cores for 16-bit operands (fp32 accumulation, as cuBLAS); the SIMT layouts otherwise
    body = wmma_lines(k, STYLE, s) if wmma.eligible(k) else body_lines(k, s, STYLE, CUDA)
    if vector.eligible(k):  # 128-bit loads and stores; the scalar loop stays for unaligned pointers
        body = vector_lines(k, STYLE, body)
    (gx, gy, gz), threads = dims(k, s)
    # launch bounds cap registers per thread so that a block always fits one SM
    head = f'extern "C" __global__ void __launch_bounds__({threads}) {k.name}({", ".join(_params(k))})'
    sizes = size_args(k)  # run-time sizes travel as pointer-sized integers, like the pointers
    bufs = [*k.inputs(), *k.outs()]
    ptrs = [f"void* p{i}" for i in range(len(bufs))] + [f"void* z{i}" for i in range(len(sizes))]
    casts = [f"({STYLE.ctype(b.dtype)}*)p{i}" for i, b in enumerate(bufs)]
    launcher = [f'extern "C" int launch_{k.name}({", ".join(ptrs + ["void* stream"])}) {{',
                *(f"    const int64_t {n} = (int64_t)(intptr_t)z{i};" for i, n in enumerate(sizes)),
                f"    {k.name}<<<dim3({gx}, {gy}, {gz}), {threads}, 0, (cudaStream_t)stream>>>"
                f"({', '.join(casts + list(sizes))});",
                "    return (int)cudaGetLastError();", "}"]
    return "\n".join([head + " {", *body, "}", *launcher])


def program_source(kernels: Iterable[str]) -> str:
    """The .cu file: the prelude and the kernels with their launchers."""
    return PRELUDE_CU + "\n\n".join(kernels) + "\n"


def built_for(arch: str) -> Requires | None:
    """What a cubin built for `arch` runs on: sm_XY on X.Y and newer of major X (sm_90a on 9.0 only)."""
    m = re.fullmatch(r"sm_(\d+)(\d)(a?)", arch)
    if m is None:
        return None
    return Requires((int(m.group(1)), int(m.group(2))), f"kernels compiled for {arch}", same_major=True)


def nvcc_flags(arch: str) -> list[str]:
    return [*NVCC_FLAGS, f"-arch={arch}"]


def _launch(k: Kernel, schedule: Schedule, ref: Ref) -> list[str]:
    args = ", ".join([f"{ref(b)}.data_ptr()" for b in k.inputs()] + [f"{b.name}.data_ptr()" for b in k.outs()]
                     + [*size_args(k)])
    return [f"_akg_check(_akg_lib().launch_{k.name}({args}, _akg_stream()), {k.name!r})"]


def _matmul_default(k: Kernel, target: HardwareModel) -> Schedule:
    return wmma.SCHEDULE if wmma.eligible(k) else Schedule(BM=64, BN=64, BK=16, TM=4, TN=4)


def _matmul_space(k: Kernel, target: HardwareModel) -> list[Schedule]:
    if wmma.eligible(k):
        return [wmma.SCHEDULE]
    return [Schedule(BM=bm, BN=bn, BK=bk, TM=tm, TN=tn) for bm in (32, 64, 128) for bn in (32, 64, 128)
            for bk in (8, 16, 32) for tm, tn in ((4, 4), (8, 4), (8, 8)) if bm % tm == 0 and bn % tn == 0
            and 64 <= (bm // tm) * (bn // tn) <= 256]


def _groups(k: Kernel, target: HardwareModel) -> Schedule:
    """256 threads a group; 1024 where fewer rows than SMs are each too long to keep in registers (a
    layer norm over 16 rows of 4M): the rows' groups are all the GPU runs, each must keep its SM busy."""
    rows = math.prod(v.extent for v in (k.coords if k.kind == "reduce" else row_coords(k)[0]))
    n = max((math.prod(v.extent for v in r.axes) for r in k.reductions()), default=0)
    long = isinstance(rows, int) and isinstance(n, int) and rows < target.units and n > KEEP_PER_SWEEP * 1024
    return Schedule(THREADS=1024 if long else 256)


def _groups_space(k: Kernel, target: HardwareModel) -> list[Schedule]:
    return [Schedule(THREADS=t) for t in (64, 128, 256, 512, 1024)]


def _grid_stride(k: Kernel, target: HardwareModel) -> Schedule:
    return Schedule(BLOCK=256)


def _grid_stride_space(k: Kernel, target: HardwareModel) -> list[Schedule]:
    return [Schedule(BLOCK=b) for b in (128, 256, 512, 1024)]


TEMPLATES = {
    "pointwise": Template(render_kernel, _launch, _grid_stride, _grid_stride_space),
    "reduce": Template(render_kernel, _launch, _groups, _groups_space),
    "rownorm": Template(render_kernel, _launch, _groups, _groups_space),
    "matmul": Template(render_kernel, _launch, _matmul_default, _matmul_space),
}


class CudaBackend(BackendBase):
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
        src = program_source(sources.values())
        # pointers, sizes, stream
        names = {k.name: len(k.inputs()) + len(k.outs()) + 1 + len(size_args(k)) for k in prog.kernels()}
        return Frame([], f"_AKG_SOURCE = r'''{src}'''\n_AKG_NVCC = {nvcc_flags(target.arch)!r}\n"
                     f"_AKG_KERNELS = {names!r}\n" + BUILD, {}, built_for(target.arch))

    def compile_only(self, prog: KernelProgram, schedules: Schedules, target: HardwareModel) -> str:
        """Compiles every kernel with the local nvcc for the target's arch (no GPU needed); the line the
        report shows, or an AkgError with the compiler's first error."""
        nvcc = shutil.which("nvcc")
        if nvcc is None:
            raise AkgError("no nvcc on PATH: install the CUDA toolkit to compile CUDA-C here, or run on a GPU machine")
        src = program_source(render_kernel(k, schedules[k.name]) for k in prog.kernels())
        flags = nvcc_flags(target.arch)
        with tempfile.TemporaryDirectory(prefix="akg-nvcc-") as d:
            cu = os.path.join(d, "kernels.cu")
            Path(cu).write_text(src)
            # the device code through ptxas for the arch (nvcc's front end checks the launch wrappers too);
            # the host compiler's pass, which would take twice as long again, is left to the GPU machine
            r = subprocess.run([nvcc, *flags, "-cubin", cu, "-o", os.path.join(d, "kernels.cubin")],
                               capture_output=True, text=True)
        if r.returncode:
            err = next((ln for ln in r.stderr.splitlines() if "error" in ln), r.stderr.strip()[:300])
            raise AkgError(f"nvcc could not compile the CUDA-C kernels: {err.replace(cu, 'kernels.cu')}")
        digest = hashlib.sha256(src.encode()).hexdigest()[:12]
        return f"compiled with nvcc for {target.arch} ({len(prog.kernels())} kernels, source {digest}), not run"


BACKEND = CudaBackend()
