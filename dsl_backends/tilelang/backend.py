"""TileLang backend: kernel factories from `render`, compiled on first use by `tilelang.compile` (CUDA on
the GPU; on the CPU the C target with -O3, since its default build is unoptimised), called on flat views."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hardware_models.spec import HardwareModel
from ir.kernel.ir import Buf, Kernel, KernelProgram

from ..base import Manifest
from ..exprs import pow2
from ..module import write_module
from . import render

MANIFEST = Manifest.load(Path(__file__).with_name("manifest.toml"))
IMPORTS = ["import functools", "import logging", "", "import tilelang", "import tilelang.language as T"]
RUNTIME = '''
logging.getLogger("TileLang").setLevel(logging.WARNING)  # one line per compiled kernel otherwise


@functools.cache
def _akg_tilelang(factory, gpu):
    if gpu:
        return tilelang.compile(factory(True), target="cuda")
    return tilelang.compile(factory(False), target="c", execution_backend="cython", compile_flags=["-O3"])


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


def _akg_launch(factory, out, args, shapes=None):
    """Runs a kernel on its buffers as declared; on CPU tensors through TileLang's C target."""
    gpu = out.is_cuda
    shapes = shapes or (None,) * len(args)
    _akg_tilelang(factory, gpu)(*[_akg_flat(a, gpu, s) for a, s in zip(args, shapes)], _akg_flat(out, gpu))
'''


class TileLangBackend:
    manifest = MANIFEST

    def default_schedule(self, k: Kernel, target: HardwareModel, executor: str) -> dict[str, Any]:
        if k.kind == "pointwise":
            return {"BLOCK": min(pow2(k.out.numel), 1024), "threads": 256}
        if k.kind == "reduce":
            red = max(math.prod(v.extent for v in r.axes) for r in k.reductions())
            br = max(min(pow2(red), render.MAX_SINGLE_PASS), 32)
            return {"BM": max(1, min(pow2(k.out.numel), 4, 4096 // br)), "BR": br, "threads": 128}
        M, N, _, _ = render.gemm_dims(k)
        return {"BM": 128 if M >= 128 else max(16, pow2(M)), "BN": 128 if N >= 128 else max(16, pow2(N)),
                "BK": 32, "num_stages": 2, "threads": 128}

    def tuning_space(self, k: Kernel, target: HardwareModel) -> list[dict[str, Any]]:
        if k.kind == "pointwise":
            return [{"BLOCK": b, "threads": t} for b in (512, 1024, 2048, 4096) for t in (128, 256)]
        if k.kind == "reduce":
            red = max(math.prod(v.extent for v in r.axes) for r in k.reductions())
            br = max(min(pow2(red), render.MAX_SINGLE_PASS), 32)
            return [{"BM": bm, "BR": br, "threads": t} for bm in (1, 2, 4, 8) for t in (128, 256) if bm * br <= 16384]
        return [{"BM": bm, "BN": bn, "BK": bk, "num_stages": s, "threads": t}
                for bm in (64, 128) for bn in (64, 128, 256) for bk in (32, 64) for s in (2, 3) for t in (128, 256)]

    def render_kernel(self, k: Kernel, target: HardwareModel) -> str:
        return render.render_kernel(k, k.schedule)

    def launch(self, k: Kernel, ref: Callable[[Buf], str]) -> list[str]:
        args = "(" + "".join(f"{ref(b)}, " for b in k.inputs()) + ")"
        shaped = render.views(k)
        if not shaped:
            return [f"_akg_launch({k.name}, {k.out.name}, {args})"]
        shapes = "(" + "".join(f"{shaped[b.name].shape if b.name in shaped else None}, " for b in k.inputs()) + ")"
        return [f"_akg_launch({k.name}, {k.out.name}, {args}, {shapes})"]

    def render_module(self, prog: KernelProgram, target: HardwareModel, header: str, meta: dict[str, Any],
                      weights: dict[str, Any]) -> str:
        sources = {k.name: self.render_kernel(k, target) for k in prog.kernels()}
        return write_module(prog, meta, header, IMPORTS, RUNTIME, sources, self.launch, weights)


BACKEND = TileLangBackend()
