"""Pallas backend: Triton's tile templates spelled in JAX (`render`), launched from ModelNew through
`pallas_call`; torch tensors go to JAX and back through DLPack (no copies)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from hardware_models.spec import HardwareModel
from ir.kernel.analysis import gemm_dims
from ir.kernel.ir import Kernel, KernelProgram, size_args
from ir.kernel.schedule import Schedule, Schedules

from ..base import BackendBase, Frame, Manifest, Ref
from ..exprs import fold_grid, row_count
from ..triton.backend import TEMPLATES as TRITON
from ..triton.backend import TritonBackend, flat_default, flat_space
from . import render, rows, tpu

MANIFEST = Manifest.load(Path(__file__).with_name("manifest.toml"))
# the module's runtime: pallas_call built once per kernel, grid, output and executor
RUNTIME = '''
# int64/float64 buffers stay 64-bit inside the launch (JAX would make them 32-bit)
_akg_x64 = jax.enable_x64 if hasattr(jax, "enable_x64") else jax.experimental.enable_x64
_AKG_JDT = {torch.float16: jnp.float16, torch.bfloat16: jnp.bfloat16, torch.float32: jnp.float32,
            torch.float64: jnp.float64, torch.int8: jnp.int8, torch.int16: jnp.int16, torch.int32: jnp.int32,
            torch.int64: jnp.int64, torch.uint8: jnp.uint8, torch.bool: jnp.bool_}


_AKG_IMPORT = []  # once checked here: [whether JAX's buffer import takes the device type]; [None]: it failed


def _akg_to_jax(args):
    """Flat JAX views of `args`. On CUDA, one stream handshake per launch: JAX's public from_dlpack asks
    torch for one per tensor and re-checks each array (most of a launch's host time); the first views are
    checked against their tensors, and JAX's public path is kept where that check or the import fails."""
    flat = [a.detach().reshape(-1) for a in args]  # dlpack refuses a tensor that requires grad (weights)
    if not flat or flat[0].device.type != "cuda" or _AKG_IMPORT == [None]:
        return [jax.dlpack.from_dlpack(a) for a in flat]
    try:
        from jax._src import xla_bridge
        from jax._src.lib import _jax
        dev = xla_bridge.get_backend("cuda").device_from_local_hardware_id(flat[0].device.index)
        stream = dev.get_stream_for_external_ready_events()
        kind = (int(flat[0].__dlpack_device__()[0]),) if (_AKG_IMPORT or [True])[0] else ()
        views = []
        for i, a in enumerate(flat):  # JAX's ready-event stream waits once for torch's stream, then -1: no sync
            cap = a.__dlpack__(stream=stream if i == 0 else -1)
            try:
                views.append(_jax.dlpack_managed_tensor_to_buffer(cap, dev, stream, None, *kind))
            except TypeError:  # an older jaxlib (no device-type argument): found on the first launch only
                if _AKG_IMPORT or not kind:
                    raise
                kind = ()
                views.append(_jax.dlpack_managed_tensor_to_buffer(cap, dev, stream, None))
        if not _AKG_IMPORT:
            if not all(v.unsafe_buffer_pointer() == a.data_ptr() and v.shape == (a.numel(),)
                       and v.dtype == _AKG_JDT[a.dtype] for v, a in zip(views, flat)):
                raise RuntimeError("a view is not its tensor")
            _AKG_IMPORT.append(bool(kind))
        return views
    except Exception:  # noqa: BLE001 - JAX's private import moved or differs: its public path instead
        _AKG_IMPORT[:] = [None]
        return [jax.dlpack.from_dlpack(a) for a in flat]


@functools.cache
def _akg_pallas(kernel, grid, numels, dtypes, interpret, num_warps, num_stages, block, sizes=()):
    if sizes:  # run-time sizes (--dynamic): the kernel is traced once per size
        kernel = functools.partial(kernel, **dict(sizes))
    params = None if interpret else plt.CompilerParams(num_warps=num_warps, num_stages=num_stages)
    # inputs are whole flat refs (gathers); the outputs are blocked when each program writes one flat tile
    # block: a tile (BLOCK,) or a column (BM, 1) of each flat output, the i-th along the grid
    tail = (1,) * (len(block) - 1 if block else 0)
    outs = [jax.ShapeDtypeStruct((n,) + tail, d) for n, d in zip(numels, dtypes)]  # one, or its siblings too
    spec = pl.BlockSpec(block, lambda i, *_: (i,) + (0,) * (len(block) - 1)) if block else None
    blocked = {"out_specs": spec if len(outs) == 1 else tuple([spec] * len(outs))} if block else {}
    return jax.jit(pl.pallas_call(kernel, out_shape=outs[0] if len(outs) == 1 else tuple(outs), grid=grid,
                                  interpret=interpret, compiler_params=params, **blocked))


def _akg_launch(kernel, grid, out, args, num_warps=4, num_stages=1, block=None, sizes=(), more=()):
    """Runs `kernel` over `grid` on flat views of `args`; returns its output shaped like `out` (with
    `more`, the kernel's other outputs: a tuple shaped like out and them). On CPU tensors the kernel
    runs in Pallas' interpreter (for checking, not speed)."""
    interpret = out.device.type != "cuda"
    with _akg_x64(True), _akg_on(out):
        dtypes = tuple(_AKG_JDT[t.dtype] for t in (out, *more))
        numels = tuple(t.numel() for t in (out, *more))
        f = _akg_pallas(kernel, grid, numels, dtypes, interpret, num_warps, num_stages, block, sizes)
        _AKG_INTERPRET[0] = interpret  # read while the kernel is traced (on the first call)
        y = f(*_akg_to_jax(args))
        if not more:
            return torch.from_dlpack(y).view(out.shape)
        return tuple(torch.from_dlpack(a).view(t.shape) for a, t in zip(y, (out, *more)))
'''
IMPORTS = ["import contextlib", "import functools", "import os", "",
           'os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # leave GPU memory to torch',
           "import jax  # noqa: E402", "import jax.experimental  # noqa: E402",
           "import jax.numpy as jnp  # noqa: E402", "from jax.experimental import pallas as pl  # noqa: E402",
           "import jax.experimental.pallas.triton as plt  # noqa: E402"]


def _launch(k: Kernel, s: Schedule, ref: Ref) -> list[str]:
    args = "(" + "".join(f"{ref(b)}, " for b in k.inputs()) + ")"
    opts = f"num_warps={s.get('num_warps', 4)}, num_stages={s.get('num_stages', 1)}"
    if k.kind == "pointwise":
        grid = f"({-(-k.out.numel // s['BLOCK'])},)"
        opts += f", block=({s['BLOCK']},)"
    elif k.kind == "reduce":
        grid = f"({-(-k.out.numel // s['BM'])},)"
        opts += f", block=({s['BM']}, 1)"
    elif k.kind == "rownorm":  # whole flat outputs, written by scatter (a row's columns may be strided)
        grid = f"({-(-row_count(k) // s['BM'])},)"
    else:
        M, N, _, B = gemm_dims(k)
        tiles = -(-M // s["BM"]) * -(-N // s["BN"])
        grid = f"({tiles * B},)" if fold_grid(s, B) else f"({tiles}, {B})"
    sizes = size_args(k)
    if sizes:
        opts += ", sizes=(" + "".join(f"({n!r}, {n}), " for n in sizes) + ")"
    o = k.out.name
    if k.also:  # the kernel's other outputs come back with its own
        more = "".join(f"{b.name}, " for b, _ in k.also)
        return [f"{o}, {more} = _akg_launch({k.name}, {grid}, {o}, {args}, {opts}, more=({more}))"]
    return [f"{o} = _akg_launch({k.name}, {grid}, {o}, {args}, {opts})"]


# Triton's schedules and tuning spaces (the GPU lowering is Triton's too), Pallas' own sources
TEMPLATES = {kind: replace(TRITON[kind], render=lambda k, s, target, fn=fn: fn(k, s), launch=_launch)
             for kind, fn in (("pointwise", render.pointwise), ("reduce", render.reduction), ("matmul", render.matmul),
                              ("rownorm", rows.rownorm))}
# Pallas' pointwise template is a flat block only (Triton's [y, x] tiles for transposes are Triton's)
TEMPLATES["pointwise"] = replace(TEMPLATES["pointwise"], default=flat_default, space=flat_space)


class PallasBackend(BackendBase):
    """GPU targets: Triton's templates spelled in JAX; TPU targets: `tpu`'s BlockSpec kernels (the
    schedule says which: a TPU schedule has layout="tpu")."""

    manifest = MANIFEST
    overrides = TritonBackend.overrides
    templates = TEMPLATES

    def default_schedule(self, k: Kernel, target: HardwareModel) -> Schedule:
        return tpu.default_schedule(k, target) if target.kind == "tpu" else super().default_schedule(k, target)

    def tuning_space(self, k: Kernel, target: HardwareModel) -> list[Schedule]:
        return tpu.space(k, target) if target.kind == "tpu" else super().tuning_space(k, target)

    def render_kernel(self, k: Kernel, schedule: Schedule, target: HardwareModel) -> str:
        return tpu.render(k, schedule) if target.kind == "tpu" else super().render_kernel(k, schedule, target)

    def launch(self, k: Kernel, schedule: Schedule, ref: Ref) -> list[str]:
        return tpu.launch(k, schedule, ref) if schedule.get("layout") == "tpu" else super().launch(k, schedule, ref)

    def stores_siblings(self, target: HardwareModel) -> bool:
        return super().stores_siblings(target) and target.kind != "tpu"  # a TPU kernel has one output

    def fuses_rows(self, target: HardwareModel) -> bool:
        return super().fuses_rows(target) and target.kind != "tpu"  # the row template is the GPU's

    def frame(self, prog: KernelProgram, schedules: Schedules, target: HardwareModel,
              sources: dict[str, str]) -> Frame:
        if target.kind == "tpu":
            vmem = (f"_AKG_VMEM_LIMIT = {int(target.chip('local_mem_per_unit_bytes')) * 3 // 4}\n"
                    f"_AKG_TPU_CHIP = ({target.name.removeprefix('tpu-')!r}, {target.units})\n")
            return Frame(IMPORTS + tpu.IMPORTS, render.PRELUDE + vmem + tpu.RUNTIME, sources)
        return Frame(IMPORTS, render.PRELUDE + RUNTIME, sources)


BACKEND = PallasBackend()
