"""TileLang backend: kernel factories from `render`, compiled on first use by `tilelang.compile` (CUDA on
the GPU; on the CPU the C target with -O3, since its default build is unoptimised), called on flat views."""

from __future__ import annotations

import math
from pathlib import Path

from hardware_models.cost import Tiling
from hardware_models.spec import HardwareModel
from ir.kernel.analysis import gemm_dims
from ir.kernel.ir import Kernel, KernelProgram, size_args
from ir.kernel.schedule import Schedule, Schedules

from ..base import BackendBase, Frame, Manifest, Ref, Template, gpu_tiling
from ..exprs import pow2, row_count, row_longest
from . import exprs, render, rows

MANIFEST = Manifest.load(Path(__file__).with_name("manifest.toml"))
IMPORTS = ["import functools", "import logging", "", "import tilelang", "import tilelang.language as T"]
RUNTIME = '''
logging.getLogger("tilelang").setLevel(logging.WARNING)  # its INFO: two lines per compiled kernel otherwise


@functools.cache
def _akg_tilelang(factory, gpu, sizes=()):
    """Compiled once per kernel, device and run-time sizes (--dynamic: the factory takes them)."""
    if gpu:
        return tilelang.compile(factory(True, *sizes), target="cuda")
    return tilelang.compile(factory(False, *sizes), target="c", execution_backend="cython",
                            compile_flags=_AKG_C_FLAGS + _akg_c_pch())


_AKG_C_FLAGS = ["-O3"]


@functools.cache
def _akg_c_pch():
    """Flags that include TileLang's C runtime header precompiled. Every kernel's g++ run otherwise
    parses it (70,000 lines after the preprocessor: most of the compile); the copy is built once per
    compiler, header and flags into akg's toolchain cache. gcc uses it only where it fits the command
    (else it reads the header); any failure here compiles without it."""
    import hashlib
    import os
    import subprocess
    from pathlib import Path

    try:
        from tilelang.contrib.cc import get_cplus_compiler
        from tilelang.env import TILELANG_TEMPLATE_PATH as inc

        cxx = get_cplus_compiler()
        head = Path(inc) / "tl_templates" / "cpp"
        text = (head / "common.h").read_bytes() + (head / "half.hpp").read_bytes()
        version = subprocess.run([cxx, "--version"], capture_output=True, text=True, timeout=30).stdout
        key = hashlib.sha256(text + f"{cxx} {version} {inc} {_AKG_C_FLAGS}".encode()).hexdigest()[:20]
        base = os.environ.get("AKG_TOOLCHAIN_CACHE") or os.path.join(
            os.environ.get("AKG_CACHE_DIR", Path.home() / ".cache" / "akg"), "toolchain")
        root = Path(base) / "tilelang-c-pch" / key
        hdr, pch = root / "akg_tl.h", root / "akg_tl.h.gch"
        if any(c.isspace() for c in str(root)):  # TileLang splits its flags on whitespace
            return []
        if not pch.exists():
            root.mkdir(parents=True, exist_ok=True)
            tag = f"{os.getpid()}"  # concurrent builds never share a file; the last replace wins
            (root / f"akg_tl.h.{tag}").write_text("#include <tl_templates/cpp/common.h>\\n")
            os.replace(root / f"akg_tl.h.{tag}", hdr)
            subprocess.run([cxx, "-std=c++17", "-fPIC", f"-I{inc}", *_AKG_C_FLAGS, "-x", "c++-header", str(hdr),
                            "-o", str(root / f"akg_tl.h.gch.{tag}")], check=True, capture_output=True, timeout=300)
            os.replace(root / f"akg_tl.h.gch.{tag}", pch)
        return ["-include", str(hdr)]
    except Exception:  # noqa: BLE001 - the precompiled header only saves time
        return []


def _akg_flat(t, gpu, shape=None):
    """A buffer as the kernel declares it: flat (bool as bytes; bf16 as 16-bit words on the C target,
    which has no bf16), or a 2-D GEMM operand that T.copy stages (float32 on the C target)."""
    if shape is not None:
        t = t.reshape(shape)
        return t if gpu or t.dtype not in (torch.float16, torch.bfloat16) else t.float()
    t = t.reshape(-1)
    if t.dtype == torch.bool:
        return t.view(torch.uint8)
    return t if gpu or t.dtype != torch.bfloat16 else t.view(torch.uint16)


def _akg_launch(factory, out, args, shapes=None, sizes=(), more=()):
    """Runs a kernel on its buffers as declared (`more`: its other outputs); on CPU tensors through
    TileLang's C target."""
    gpu = out.is_cuda
    shapes = shapes or (None,) * len(args)
    _akg_tilelang(factory, gpu, sizes)(*[_akg_flat(a, gpu, s) for a, s in zip(args, shapes)], _akg_flat(out, gpu),
                                       *[_akg_flat(m, gpu) for m in more])
'''


def _red_br(k: Kernel) -> int:
    red = max(math.prod(v.extent for v in r.axes) for r in k.reductions())
    return max(min(pow2(red), render.MAX_SINGLE_PASS), 32)


def _pointwise_default(k: Kernel, target: HardwareModel) -> Schedule:
    return Schedule(BLOCK=min(pow2(k.out.numel), 1024), threads=256)


def _pointwise_space(k: Kernel, target: HardwareModel) -> list[Schedule]:
    return [Schedule(BLOCK=b, threads=t) for b in (512, 1024, 2048, 4096) for t in (128, 256)]


def _reduce_default(k: Kernel, target: HardwareModel) -> Schedule:
    br = _red_br(k)
    return Schedule(BM=max(1, min(pow2(k.out.numel), 4, 4096 // br)), BR=br, threads=128)


def _reduce_space(k: Kernel, target: HardwareModel) -> list[Schedule]:
    br = _red_br(k)
    return [Schedule(BM=bm, BR=br, threads=t) for bm in (1, 2, 4, 8) for t in (128, 256) if bm * br <= 16384]


def _row_br(k: Kernel) -> int:
    return max(min(pow2(row_longest(k)), render.MAX_SINGLE_PASS), 32)


def _row_default(k: Kernel, target: HardwareModel) -> Schedule:
    br = _row_br(k)
    return Schedule(BM=max(1, min(pow2(row_count(k)), 4, 4096 // br)), BR=br, threads=128 if br <= 1024 else 256)


def _row_space(k: Kernel, target: HardwareModel) -> list[Schedule]:
    br = _row_br(k)
    return [Schedule(BM=bm, BR=br, threads=t) for bm in (1, 2, 4, 8) for t in (128, 256) if bm * br <= 16384]


def _matmul_default(k: Kernel, target: HardwareModel) -> Schedule:
    M, N, _, _ = gemm_dims(k)
    return Schedule(BM=128 if M >= 128 else max(16, pow2(M)), BN=128 if N >= 128 else max(16, pow2(N)),
                    BK=32, num_stages=2, threads=128)


def _matmul_space(k: Kernel, target: HardwareModel) -> list[Schedule]:
    return [Schedule(BM=bm, BN=bn, BK=bk, num_stages=s, threads=t)
            for bm in (64, 128) for bn in (64, 128, 256) for bk in (32, 64) for s in (2, 3) for t in (128, 256)]


def _launch(k: Kernel, schedule: Schedule, ref: Ref) -> list[str]:
    args = "(" + "".join(f"{ref(b)}, " for b in k.inputs()) + ")"
    shaped = render.views(k, schedule.get("BK", 32))
    sizes = size_args(k)
    extra = ", sizes=(" + "".join(f"{n}, " for n in sizes) + ")" if sizes else ""
    if k.also:
        extra += ", more=(" + "".join(f"{b.name}, " for b, _ in k.also) + ")"
    if not shaped:
        return [f"_akg_launch({k.name}, {k.out.name}, {args}{extra})"]
    shapes = "(" + "".join(f"{shaped[b.name].shape if b.name in shaped else None}, " for b in k.inputs()) + ")"
    return [f"_akg_launch({k.name}, {k.out.name}, {args}, {shapes}{extra})"]


TEMPLATES = {
    "pointwise": Template(lambda k, s, t: render.pointwise(k, s), _launch, _pointwise_default, _pointwise_space),
    "reduce": Template(lambda k, s, t: render.reduction(k, s), _launch, _reduce_default, _reduce_space),
    "matmul": Template(lambda k, s, t: render.matmul(k, s), _launch, _matmul_default, _matmul_space),
    "rownorm": Template(lambda k, s, t: rows.rownorm(k, s), _launch, _row_default, _row_space),
}


class TileLangBackend(BackendBase):
    manifest = MANIFEST
    overrides = exprs.OVERRIDES
    templates = TEMPLATES

    def tiling(self, s: Schedule) -> Tiling | None:
        """A tile over its `threads` (32 to a warp)."""
        return gpu_tiling(s, s.get("threads", 128) // 32) if "BM" in s and "BN" in s and "BK" in s else None

    def frame(self, prog: KernelProgram, schedules: Schedules, target: HardwareModel,
              sources: dict[str, str]) -> Frame:
        return Frame(IMPORTS, RUNTIME, sources)


BACKEND = TileLangBackend()
