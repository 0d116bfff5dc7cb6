"""Pallas backend: Triton's tile templates spelled in JAX (`render`), launched from ModelNew through
`pallas_call`; torch tensors go to JAX and back through DLPack (no copies)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from hardware_models.spec import HardwareModel
from ir.kernel.ir import Buf, Kernel, KernelProgram

from ..base import Manifest
from ..module import write_module
from ..triton.backend import TritonBackend
from . import render

MANIFEST = Manifest.load(Path(__file__).with_name("manifest.toml"))
# the module's runtime: pallas_call built once per kernel, grid, output and executor
RUNTIME = '''
# int64/float64 buffers stay 64-bit inside the launch (JAX would make them 32-bit)
_akg_x64 = jax.enable_x64 if hasattr(jax, "enable_x64") else jax.experimental.enable_x64
_AKG_JDT = {torch.float16: jnp.float16, torch.bfloat16: jnp.bfloat16, torch.float32: jnp.float32,
            torch.float64: jnp.float64, torch.int8: jnp.int8, torch.int16: jnp.int16, torch.int32: jnp.int32,
            torch.int64: jnp.int64, torch.uint8: jnp.uint8, torch.bool: jnp.bool_}


@functools.cache
def _akg_pallas(kernel, grid, numel, dtype, interpret, num_warps, num_stages, block):
    params = None if interpret else plt.CompilerParams(num_warps=num_warps, num_stages=num_stages)
    # inputs are whole flat refs (gathers); the output is blocked when each program writes one flat tile
    # block: a tile (BLOCK,) or a column (BM, 1) of the flat output, the i-th along the grid
    shape = (numel,) + (1,) * (len(block) - 1 if block else 0)
    blocked = {"out_specs": pl.BlockSpec(block, lambda i, *_: (i,) + (0,) * (len(block) - 1))} if block else {}
    return jax.jit(pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(shape, dtype), grid=grid,
                                  interpret=interpret, compiler_params=params, **blocked))


def _akg_launch(kernel, grid, out, args, num_warps=4, num_stages=1, block=None):
    """Runs `kernel` over `grid` on flat views of `args`; returns its output shaped like `out`.
    On CPU tensors the kernel runs in Pallas' interpreter (for checking, not speed)."""
    interpret = out.device.type != "cuda"
    with _akg_x64(True):
        f = _akg_pallas(kernel, grid, out.numel(), _AKG_JDT[out.dtype], interpret, num_warps, num_stages, block)
        _AKG_INTERPRET[0] = interpret  # read while the kernel is traced (on the first call)
        y = f(*[jax.dlpack.from_dlpack(a.reshape(-1)) for a in args])
        return torch.from_dlpack(y).view(out.shape)
'''
IMPORTS = ["import functools", "import os", "",
           'os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # leave GPU memory to torch',
           "import jax  # noqa: E402", "import jax.experimental  # noqa: E402",
           "import jax.numpy as jnp  # noqa: E402", "from jax.experimental import pallas as pl  # noqa: E402",
           "import jax.experimental.pallas.triton as plt  # noqa: E402"]


class PallasBackend(TritonBackend):
    """Schedules and tuning space are Triton's: the GPU lowering is Triton's too."""

    manifest = MANIFEST

    def default_schedule(self, k: Kernel, target: HardwareModel, executor: str) -> dict[str, Any]:
        s = super().default_schedule(k, target, executor)
        if k.kind == "matmul":  # Triton's gemm_dims leaves its grid in the schedule
            s.pop("_grid", None)
        return s

    def render_kernel(self, k: Kernel, target: HardwareModel) -> str:
        return render.render_kernel(k, k.schedule)

    def launch(self, k: Kernel, ref: Callable[[Buf], str]) -> list[str]:
        s = k.schedule
        args = "(" + "".join(f"{ref(b)}, " for b in k.inputs()) + ")"
        opts = f"num_warps={s.get('num_warps', 4)}, num_stages={s.get('num_stages', 1)}"
        if k.kind == "pointwise":
            grid = f"({-(-k.out.numel // s['BLOCK'])},)"
            opts += f", block=({s['BLOCK']},)"
        elif k.kind == "reduce":
            grid = f"({-(-k.out.numel // s['BM'])},)"
            opts += f", block=({s['BM']}, 1)"
        else:
            M, N, _, B = render.gemm_dims(k)
            grid = f"({-(-M // s['BM']) * -(-N // s['BN'])}, {B})"
        o = k.out.name
        return [f"{o} = _akg_launch({k.name}, {grid}, {o}, {args}, {opts})"]

    def render_module(self, prog: KernelProgram, target: HardwareModel, header: str, meta: dict[str, Any],
                      weights: dict[str, Any]) -> str:
        sources = {k.name: self.render_kernel(k, target) for k in prog.kernels()}
        return write_module(prog, meta, header, IMPORTS, render.PRELUDE + RUNTIME, sources, self.launch, weights)


BACKEND = PallasBackend()
