"""How a problem is planned: one value passed from the command layer down (Triton's `CUDAOptions` is the
model), and the pass pipeline it asks of a backend on a target."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dsl_backends import Backend
from hardware_models.spec import HardwareModel
from ir.passes import Pass, PassPipeline, pass_class
from ir.passes.library import kept_composites, marked_primitives

from .strategy import CPU_LIBRARY_ROWS, Strategy


@dataclass(frozen=True)
class PlanOptions:
    """`conv`: "library" keeps convolutions as declared torch calls (cuDNN; measured 7x faster than akg's
    fp32 implicit GEMM on the H100), "generated" lowers them to implicit GEMMs where the backend can
    (manifest kind "conv"), and depthwise ones with small windows to unrolled windows where it has kind
    "window"; "depthwise" generates only the depthwise ones; "channels-last" calls torch over channels-last
    operands. `pure`: every group generated (convolutions too, where the backend can), no library call but
    torch's random draws; a group the backend cannot generate is an error naming it. `rows=False` keeps row
    reductions and their epilogues as separate kernels. `tuned`: where the device is here, take the tuning
    database's best strategy for the problem (when the caller left `conv` and `rows` at their defaults) and
    each kernel's best schedule (what `akg tune` measured on this hardware), not the cost model's; where
    nothing is measured, the cost model may leave GEMMs to the library (`model_gemm_library`);
    `tuned=False` is the plan exactly as asked. `dynamic`: input dimensions that vary at run time
    (`ir.dynamic`): the module takes any size from 1 to the traced one there. `library`: op families
    (`ir.passes.library.LIBRARY_FAMILIES`) left to torch, their prologues and epilogues generated.
    `train`: the module in training mode; `allow_opaque`: ATen ops akg does not model kept as torch calls.
    `tf32_convs`: an untuned plan may call torch's fp32 convolutions over channels-last operands where torch
    lets cuDNN use TF32 (`cudnn.allow_tf32`, its default; eager's own kernels are then TF32 too); translate
    plans again channels-first when the verifier rejects them (False). `graph_replay`: the module will be
    replayed as a CUDA graph (the torch.compile backend's inference graphs), so a library call costs the
    GPU a launch, not torch's dispatch on the host, in the cost model's library-or-generated choice."""

    train: bool = False
    allow_opaque: bool = False
    conv: str = "library"
    pure: bool = False
    tuned: bool = True
    rows: bool = True
    dynamic: str | None = None
    library: tuple[str, ...] = ()
    tf32_convs: bool = True
    graph_replay: bool = False


def _p(name: str, **opts: Any) -> Pass:
    return pass_class(name)(**opts)  # type: ignore[call-arg]


DEFAULT_STRATEGY = Strategy()


def pipeline_for(backend: Backend, target: HardwareModel | None = None, how: Strategy = DEFAULT_STRATEGY,
                 pure: bool = False, keep: tuple[str, ...] = ()) -> PassPipeline:
    """The pass pipeline translate runs for `how` on `target` (None: no target's splits or layouts), starting
    with simplify (translate reads the library families between it and decomposition): row fusion where
    the backend has a row template (and `how.rows`); composites in `keep` stay whole (library calls), as do
    the ops of `how.library`'s families; reductions over fewer rows than the target's parallel units split
    over chunks (of at most half a core's cache where the row allows), as do GEMMs with few output tiles
    on a GPU (their K); fp32 matmuls read a K-major B where the backend's GEMM wants it on a chip with TF32
    tensor cores (`ir.passes.layout`); `how.conv` "channels-last": convolutions run over channels-last
    operands; generated ones (or `pure`): strided transposed convolutions become one convolution per output
    phase (`ir.passes.phases`)."""
    kinds = backend.manifest.kinds
    keep = (*keep, *kept_composites(how.library))
    passes: list[Pass] = [_p("simplify"), _p("decompose", keep=keep)]
    if how.conv == "channels-last" and not pure:
        passes.append(_p("channelslast"))
    if (how.conv == "generated" or pure) and "conv" in kinds:
        passes.append(_p("tphases"))
    passes.append(_p("simplify"))
    # with no primitive to mark, the pass still passes the views that feed kept composites and channels-last
    # convolutions
    if how.library or how.conv == "channels-last" and not pure:
        cpu = target is not None and target.kind == "cpu"
        passes.append(_p("library", ops=tuple(marked_primitives(how.library)), min_rows=CPU_LIBRARY_ROWS if cpu else 0))
    gpu = target is not None and target.kind == "gpu"
    if gpu and target.units > 0:  # before K-major: a split GEMM is batched, its B chunks read in place
        passes.append(_p("splitk", units=target.units))
    caps = backend.manifest.capabilities
    if target is not None and caps.gemm_b_k_major and bool(target.peak("tensor", "tf32")):
        passes.append(_p("kmajor"))  # after the marks: a GEMM left to the library keeps its layout
    passes.append(_p("sinkreshapes"))
    if target is not None and target.units > 0:
        passes.append(_p("splitreduce", units=target.units, chunk_bytes=max(target.core_cache_bytes // 2, 0)))
    # a backend whose GEMM packs both operands reads a transposed input in place, one whose tensor cores load
    # 16-bit tiles transposed reads 16-bit ones so (`Capabilities.transposed_bytes`)
    passes += [_p("views"), _p("fuse", transposed=caps.transposed_bytes)]
    rows = how.rows and "rownorm" in kinds and (target is None or backend.fuses_rows(target))
    if rows:  # a backend whose row kernel would gather a row across a strided axis keeps such rows split
        passes.append(_p("rows", strided=0) if caps.contiguous_rows else _p("rows"))
        if "attention" in kinds:
            passes.append(_p("flash"))
    return PassPipeline(tuple(passes))
