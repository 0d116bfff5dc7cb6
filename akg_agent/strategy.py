"""Plan-level strategies a tune compares by measurement, and the one an untuned translate takes where
nothing was measured: the cost model's estimate of the library's GEMMs against the backend's own."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

from dsl_backends import Backend
from hardware_models.cost import gemm_library_choice, library_choice
from hardware_models.spec import HardwareModel
from ir.graph import Graph, Node
from ir.passes.fusion import FusionPlan
from ir.passes.library import check_families

CONV_STRATEGIES = ("library", "generated", "depthwise", "channels-last")


@dataclass(frozen=True)
class Strategy:
    """Plan-level choices a tune compares by measurement (schedules are searched inside each): row
    fusion (a softmax or norm as one row kernel) or split kernels; convolutions (`CONV_STRATEGIES`); op
    families left to the library (`ir.passes.library`: GEMMs, norms, softmax, attention, reductions,
    pooling, scans) with their prologues and epilogues generated."""

    rows: bool = True
    conv: str = "library"
    library: tuple[str, ...] = ()

    def describe(self) -> str:
        return f"rows={'fused' if self.rows else 'split'}, conv={self.conv}" + \
            (f", library={'+'.join(self.library)}" if self.library else "")

    def to_json(self) -> dict[str, Any]:
        return {"rows": self.rows, "conv": self.conv, "library": list(self.library)}

    @staticmethod
    def from_json(d: dict[str, Any]) -> Strategy:
        return Strategy(bool(d["rows"]), str(d["conv"]), check_families(d.get("library", ())))


RECURRENCE_STEPS = 64  # step kernels (steps x layers x directions) past which a GPU plan calls the library
# ... and a CPU plan, for a batch of fewer than CPU_LIBRARY_ROWS rows: torch's CPU layer runs each step's GEMM
# and gate ops one by one, and generated steps (their GEMMs too, `passes.library`) fuse the gates: a 2-layer GRU
# over 128 steps at batch 2 took 43 ms against torch's 76. At batch 4 (an LSTM tagger, 64 steps) the steps
# call MKL and lost (11.5 ms against 5.4): torch's layer there. The bound keeps the translation (~40 s for 256
# step kernels) and the module's length in reason
CPU_RECURRENCE_STEPS = 512
CPU_LIBRARY_ROWS = 4  # a linear of fewer rows stays generated on the CPU under a gemm library strategy


def recurrence_bound(target: HardwareModel) -> int:
    """The step kernels past which a hybrid plan leaves a recurrent layer to torch on `target`."""
    return CPU_RECURRENCE_STEPS if target.kind == "cpu" else RECURRENCE_STEPS


def has_long_recurrence(g: Graph, target: HardwareModel) -> bool:
    """A recurrent layer whose generated form would launch more than `recurrence_bound` steps' kernels, or on
    the CPU one at a batch whose step GEMMs would call MKL: torch runs it instead (on NVIDIA GPUs cuDNN's one
    persistent kernel per layer)."""
    def step_kernels(n: Node) -> int:
        x, at = n.args[0], n.attrs
        steps = x.shape[1] if at["batch_first"] else x.shape[0]  # type: ignore[union-attr]
        return steps * at["layers"] * (2 if at["bidirectional"] else 1)

    def wide(n: Node) -> bool:  # a batch the CPU's step GEMMs leave to MKL (or one not known here)
        x = n.args[0]
        b = (x.shape[0 if n.attrs["batch_first"] else 1] if len(x.shape) == 3 else 1)  # type: ignore[union-attr]
        return not isinstance(b, int) or b >= CPU_LIBRARY_ROWS

    def long(n: Node) -> bool:
        steps = step_kernels(n)
        return steps > recurrence_bound(target) or (target.kind == "cpu" and wide(n))
    return any(n.op == "recurrence" and long(n) for n in g.nodes)


def generated_gemm_efficiency(backend: Backend, target: HardwareModel, dtype: str = "") -> float | None:
    """The backend's GEMM as a fraction of the target's compute peak: measured on this host by `akg hw
    calibrate` (library.generated_gemm_<dsl>) where it was, else the manifest's figure for the operands'
    dtype (`gpu_bf16`), else for the target's kind (`gpu`)."""
    measured = target.fig("library", f"generated_gemm_{backend.manifest.name}")
    if measured is not None:
        return measured.value
    figures = backend.manifest.gemm_efficiency
    return figures.get(f"{target.kind}_{dtype}", figures.get(target.kind))


def model_gemm_library(plan: FusionPlan, backend: Backend, target: HardwareModel, replayed: bool = False) -> str:
    """Where the target and the backend both state their GEMMs' efficiency: the cost model's reason to
    leave the program's GEMMs to the library ("" where generating them is estimated no slower). `replayed`:
    the module runs as a CUDA graph (no host dispatch per library call)."""
    # an attention's GEMMs are one generated kernel with its softmax (the scores never stored), not GEMMs
    choices = [c for grp in plan.groups if grp.anchor is not None and not grp.flash and
               (eff := generated_gemm_efficiency(backend, target, grp.anchor.type.dtype)) and
               (c := gemm_library_choice(grp, target, eff, replayed)) is not None]
    gen, lib = sum(c.generated_s for c in choices), sum(c.library_s for c in choices)
    if not choices or lib >= gen:
        return ""
    return (f"the cost model's: {len(choices)} GEMM group{'s' if len(choices) > 1 else ''} estimated "
            f"{lib * 1e3:.3g} ms in the library against {gen * 1e3:.3g} ms generated"
            f"{' (replayed as a CUDA graph)' if replayed else ''}; akg tune measures both")


def model_attention_library(plan: FusionPlan, backend: Backend, target: HardwareModel,
                            replayed: bool = False) -> str:
    """Why a 16-bit attention the plan runs as one generated kernel should be the library's call ("" where
    not): where the backend states its 16-bit GEMMs below the library's, its attention template (the same
    tensor-core products) stands no better against torch's flash kernels (bf16 attentions of the real-size
    set: 0.54-0.67x eager generated on the H200, docs/measured.md 2026-12-01)."""
    for grp in plan.groups:
        dtype = grp.outputs[0].type.dtype if grp.flash and grp.outputs else ""
        lib = target.fig("library", f"gemm_{dtype}") if dtype in ("f16", "bf16") else None
        eff = generated_gemm_efficiency(backend, target, dtype) if lib is not None else None
        if lib is None or eff is None or eff >= lib.value:
            continue
        # priced as the GEMMs are: a small attention (a 2-layer model's, 512 tokens) is launch-bound, and one
        # call's dispatch decides
        c = library_choice(grp, target, eff, lib.value, replayed=replayed)
        if c is not None and c.library_s < c.generated_s:
            return f"a {dtype} attention left to torch's flash kernels (the backend's {dtype} products at " \
                f"{eff:.2f} of the tensor-core peak, the library's {lib.value:.2f}: {c.library_s * 1e6:.3g} us " \
                f"against {c.generated_s * 1e6:.3g})"
    return ""


def model_channels_last(plan: FusionPlan, target: HardwareModel, g: Graph | None = None, tf32: bool = False) -> str:
    """Why convolutions left to cuDNN should read channels-last operands ("" where not): its tensor-core
    convolution kernels read and write NHWC, so over channels-first tensors torch reorders the input and the
    output around every call (two extra passes over both, measured on the H200: about a third of a bf16
    ResNet's GPU time); channels-last, the reorders become views that cancel between convolutions. 16-bit
    convolutions, and fp32 ones only with `tf32` where torch lets cuDNN use TF32 (`cudnn.allow_tf32`, its
    default): over fp32 NHWC operands cuDNN picks TF32 kernels where its NCHW call may run exact fp32
    (measured on the H200: a 1x1 strided convolution 8e-4 off against 6e-7 NCHW), so the verifier judges
    them and translate plans channels-first where it rejects them (`PlanOptions.tf32_convs`)."""
    nodes = [n for grp in plan.groups for n in grp.nodes]
    convs = [n for n in nodes
             if n.op in ("conv", "conv_transpose") and n.type.rank in (4, 5) and not n.attrs["channels_last"]]
    if target.kind == "cpu" and torch.backends.mkldnn.is_available():
        # oneDNN reorders a channels-first call's input and output every time (inductor runs CPU convolutions
        # channels-last always); for two convolutions or more, not in a training graph, whose saved
        # activations and weight gradients are channels-first values the transpositions would copy (measured
        # slower on this CPU)
        saved = {id(o) for o in g.outputs} if g is not None else set()
        if any(n.op == "conv_weight_grad" for n in nodes) or any(id(a) in saved for n in convs for a in n.args[:1]):
            return ""
        if len(convs) < 2:  # the transpositions cancel only between convolutions: a single one with its
            return ""  # epilogue measured faster on the library's own reorders (docs/measured.md, 2026-11-28)
        # below 4 x 4 outputs oneDNN's channels-last kernels lose to its channels-first ones (a 3x3 at 2x2
        # 2.1x their time; at 4x4 1.4x, at 7x7 1.13x, a 1x1 at 7x7 0.81x): KernelBench's ResNet101 at 28 x 28,
        # most of its convolutions at 2x2, ran 0.66x eager channels-last, 1.07x channels-first; its SqueezeNet
        # at 64 x 64 (7x7 fire modules) 1.27x channels-last, 0.81x channels-first (docs/measured.md, 2026-12-02)
        if 2 * sum(math.prod(n.type.shape[2:]) < 16 for n in convs) > len(convs):
            return ""
        return f"{len(convs)} oneDNN convolution(s) over channels-last operands (a channels-first call reorders " \
            "its input and output each time)"
    if target.kind != "gpu" or target.vendor != "nvidia":
        return ""
    wide = tf32 and torch.backends.cudnn.allow_tf32  # torch's flag: eager's fp32 convolutions use TF32 too
    convs = [n for n in convs if n.type.dtype in ("f16", "bf16") or wide and n.type.dtype == "f32"]
    # one convolution between channels-first input and output pays both transpositions itself: the
    # real-size set's single 16-bit convolutions ran 0.59-0.80x eager channels-last on the H200 (docs/
    # measured.md, 2026-12-01); unless its output is read channels-last anyway (ViT's patches, transposed
    # to tokens)
    if len(convs) == 1 and g is not None and not _read_channels_last(g, convs[0]):
        return ""
    return f"{len(convs)} cuDNN convolution(s) over channels-last operands (its tensor-core kernels read NHWC)" \
        if convs else ""


def _read_channels_last(g: Graph, conv: Node) -> bool:
    """Whether `conv`'s output reaches a permutation moving its channel axis last, through reshapes that
    keep the leading batch and channel axes (a ViT's patch embedding: flatten, then transpose to tokens)."""
    users, seen = g.users(), [conv]
    while seen:
        n = seen.pop()
        for u in users.get(n, []):
            if u.op == "reshape" and list(u.type.shape[:2]) == list(conv.type.shape[:2]):
                seen.append(u)
            elif u.op == "permute" and u.attrs["dims"][-1] == 1:
                return True
    return False


def untuned_strategy(plan: FusionPlan, backend: Backend, target: HardwareModel, g: Graph | None = None,
                     tf32: bool = False, replayed: bool = False) -> tuple[Strategy, str]:
    """The strategy an untuned translate of the default plan takes, and why: the library's GEMMs where the
    cost model estimates them faster (`model_gemm_library`), convolutions channels-last on NVIDIA GPUs
    (16-bit) and oneDNN CPUs (inference graphs) (`model_channels_last`), else the default. With the GEMMs,
    an attention stays one call: torch's (the "attention" family) where the program called it, the generated
    kernel where the program wrote it out (the flash pass keeps its GEMMs generated: two library GEMMs would
    store the scores between them); torch's too where the plan could not make it one kernel (no attention
    template, or run-time sizes under --dynamic). `g`: the graph, whose outputs tell a
    training graph's saved activations and whose meta the op families the program had. A 16-bit attention
    alone goes to the library where the backend's 16-bit products stand below it (`model_attention_library`).
    `tf32`: fp32 convolutions may go channels-last too (`model_channels_last`). `replayed`: the module runs
    as a CUDA graph, where a library call costs a launch, not torch's dispatch."""
    last = model_channels_last(plan, target, g, tf32)
    conv = "channels-last" if last else "library"
    why = model_gemm_library(plan, backend, target, replayed)
    if not why:
        attn = model_attention_library(plan, backend, target, replayed)
        if attn:
            return Strategy(conv=conv, library=("attention",)), attn + (f"; {last}" if last else "")
        return Strategy(conv=conv), last
    why += f"; {last}" if last else ""
    if any(grp.flash for grp in plan.groups):
        return Strategy(conv=conv, library=("gemm", "attention")), why + " (attention kept whole: one call)"
    if g is not None and "attention" in g.meta.get("library_families", ()):
        # not one kernel (no flash template, or one that cannot take it: run-time sizes under --dynamic): its
        # GEMMs in the library would store the scores between them; torch's attention is one call
        return Strategy(conv=conv, library=("gemm", "attention")), why + " (attention: the library's, one call)"
    return Strategy(conv=conv, library=("gemm",)), why
