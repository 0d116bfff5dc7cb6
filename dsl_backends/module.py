"""Writes the self-contained module a translation produces: kernel sources inline, a `ModelNew`
that is constructor- and state_dict-compatible with the source `Model`, and a forward that runs
the kernel program's steps in order. Backends supply imports, prelude, sources and launches; the
torch calls for declared library steps are shared by every backend."""

from __future__ import annotations

import base64
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import torch

from ir.kernel.ir import Buf, Kernel, KernelProgram, LibraryCall
from ir.kernel.schedule import Schedule, Schedules
from ir.passes.library import VIEW_OPS
from ir.recurrence import RESULTS
from ir.sym import PREFIX, Dyn
from ir.types import DTYPES

from .chain import Chain, chain_at, reads
from .module_helpers import (
    EMBEDDING_GRAD,
    HUGE_EMPTY,
    LAST_WEIGHTS,
    NAN_ROWS,
    embedding_grad,
    huge_allocation,
    last_weight,
    nan_rows,
    state_mask,
)


class Framed(Protocol):
    """What the module writer reads of a backend's `base.Frame` (the contract imports this module)."""

    imports: list[str]
    prelude: str
    sources: dict[str, str]
    requires: Any


class Runs(Protocol):
    """What it reads of a backend's `base.Manifest`."""

    devices: tuple[str, ...]
    runtime: tuple[str, ...]


# aten ops each library step dispatches to (declared, so the verifier allows them)
LIBRARY_DECLARATIONS = {
    "conv": ["aten.convolution"], "conv_transpose": ["aten.convolution"],
    "conv_weight_grad": ["aten.convolution_backward"],
    "concat": ["aten.cat"], "max_pool": ["aten.max_pool*"], "max_pool_indices": ["aten.max_pool*"],
    "avg_pool": ["aten.avg_pool*"],
    "adaptive_avg_pool": ["aten.adaptive_avg_pool*", "aten._adaptive_avg_pool*", "aten.mean"],
    "adaptive_max_pool": ["aten.adaptive_max_pool*"],
    "cumsum": ["aten.cumsum", "aten.flip", "aten.cat"], "cumprod": ["aten.cumprod", "aten.flip", "aten.cat"],
    "dropout": ["aten.dropout", "aten.native_dropout", "aten.bernoulli*", "aten.rand*", "aten.div", "aten.mul"],
    "random": ["aten.randn", "aten.rand", "aten.normal*", "aten.uniform*", "aten.bernoulli*"],
    # the layer and what it dispatches to: cuDNN / MIOpen on GPUs, oneDNN or per-step ATen ops on the CPU
    "recurrence": ["aten.lstm", "aten.gru", "aten.rnn_tanh", "aten.rnn_relu", "aten._cudnn_rnn*", "aten.miopen_rnn*",
                   "aten.mkldnn_rnn*", "aten._thnn_fused*", "aten.addmm", "aten.add", "aten.add_", "aten.sub",
                   "aten.mul", "aten.mul_", "aten.sigmoid*", "aten.tanh*", "aten.relu*", "aten.unsafe_split",
                   "aten.unsafe_chunk", "aten.cat", "aten.stack"],
    # library strategies (`ir.passes.library`): the call and the ATen ops it dispatches to
    "matmul": ["aten.mm", "aten.bmm", "aten.mv", "aten.dot", "aten.matmul"],
    "linear": ["aten.addmm", "aten.mm", "aten.bmm", "aten.linear", "aten.matmul"],
    **{r: [f"aten.{r}"] for r in ("sum", "mean", "amax", "amin", "prod", "var", "std", "argmax", "argmin")},
    "norm": ["aten.linalg_vector_norm"], "softmax": ["aten._softmax"], "log_softmax": ["aten._log_softmax"],
    "logsumexp": ["aten.logsumexp"], "layer_norm": ["aten.native_layer_norm"], "group_norm": ["aten.native_group_norm"],
    "batch_norm": ["aten.native_batch_norm", "aten._native_batch_norm_legit*", "aten.cudnn_batch_norm",
                   "aten.miopen_batch_norm"],
    "instance_norm": ["aten.native_batch_norm", "aten._native_batch_norm_legit*", "aten.cudnn_batch_norm",
                      "aten.miopen_batch_norm", "aten.repeat"],
    "rms_norm": ["aten._fused_rms_norm", "aten.pow", "aten.mean", "aten.add", "aten.add_", "aten.rsqrt", "aten.mul"],
    # a boolean mask: torch's CPU attention turns it into an additive one (where(mask, 0, -inf)); shapes its
    # fused kernels do not take (a value width other than the key's) go to its math path, in ATen ops
    "attention": ["aten._scaled_dot_product*", "aten.tril", "aten.bitwise_and", "aten.bitwise_not",
                  "aten.logical_not", "aten.masked_fill", "aten.where", "aten.scalar_tensor", "aten._safe_softmax",
                  "aten._softmax", "aten.bmm", "aten.mul", "aten.add", "aten.div", "aten.sqrt",
                  "aten.amax", "aten.eq", "aten.any"],  # a written softmax's NaN rows (`_akg_nan_rows`)
}

REGISTER = '''
def _akg_register(root, key, tensor, kind):
    *path, leaf = key.split(".")
    mod = root
    for part in path:
        if part not in mod._modules:
            mod.add_module(part, nn.Module())
        mod = mod._modules[part]
    if kind == "parameter":
        mod.register_parameter(leaf, nn.Parameter(tensor, requires_grad=False))
    else:
        mod.register_buffer(leaf, tensor, persistent=(kind == "buffer"))


def _akg_get(root, key):
    *path, leaf = key.split(".")
    mod = root
    for part in path:
        mod = mod._modules[part]
    return mod._parameters[leaf] if leaf in mod._parameters else mod._buffers[leaf]


def _akg_const(data, dtype, shape):
    return torch.frombuffer(bytearray(base64.b64decode(data)), dtype=dtype).reshape(shape).clone()


def _akg_guard(args):
    """Each input against the envelope this module was built and verified for: never an out-of-bounds
    read or a reinterpreted dtype, a one-line error instead. Returns the run-time sizes (--dynamic)."""
    # fixed sizes, tensors only: few attribute reads first (the full check below names what differs); on a
    # CPU host after a cache flush the full check cost ~70 us a call, this ~30
    if _AKG_FAST is not None:
        try:  # a non-tensor takes the full check too
            for a, (shape, dtype) in zip(args, _AKG_FAST):
                if a.shape != shape or a.dtype is not dtype or not (
                        _AKG_ON_CUDA and a.is_cuda or _AKG_ON_CPU and a.is_cpu):
                    break
            else:
                return {}
        except AttributeError:
            pass
    sizes = {}
    for i, (a, (name, shape, dtype, value)) in enumerate(zip(args, _AKG_ENVELOPE)):
        if shape is None:  # a Python number, baked into the kernels when the module was translated
            if type(a) is not type(value) or a != value:
                raise ValueError(f"ModelNew input {name!r} (argument {i + 1}): this module was built for "
                                 f"{name}={value!r}, got {a!r}; translate again with that value in get_inputs()")
        elif not isinstance(a, torch.Tensor):
            raise TypeError(f"ModelNew input {name!r} (argument {i + 1}): expected a tensor, got {type(a).__name__}")
        elif a.dtype != dtype or a.device.type not in _AKG_DEVICES or (
                a.shape != shape if not _AKG_DYNAMIC else not _akg_fits(a.shape, shape, sizes)):
            want = [f"{d}<={_AKG_DYNAMIC[d]}" if isinstance(d, str) else d for d in shape]
            # only sizes differ: a module translated with --dynamic may serve
            sized = a.dtype == dtype and a.dim() == len(shape) and a.device.type in _AKG_DEVICES
            fix = ("translate again for these inputs" + (", or with --dynamic (e.g. --dynamic batch: sizes 1 to "
                   "get_inputs()'s there)" if sized else "") if not _AKG_DYNAMIC else
                   ", ".join(f"{d} takes sizes 1 to {b}" for d, b in _AKG_DYNAMIC.items()) + " (the same in every "
                   "input), other dimensions are fixed; translate again with a larger bound (--dynamic NAME<=N)")
            raise ValueError(f"ModelNew input {name!r} (argument {i + 1}): expected {str(dtype)[6:]} "
                             f"[{', '.join(map(str, want))}] on {' or '.join(_AKG_DEVICES)}, got {str(a.dtype)[6:]} "
                             f"{list(a.shape)} on {a.device.type}; the module was built and verified for that "
                             f"envelope only: {fix}")
    return sizes


def _akg_fits(got, want, sizes):
    if len(got) != len(want):
        return False
    for g, w in zip(got, want):
        if w.__class__ is str:
            if not 1 <= g <= _AKG_DYNAMIC[w] or sizes.setdefault(w, g) != g:
                return False
        elif g != w:
            return False
    return True
'''


REQUIRE = '''_AKG_CAPABLE = {}


def _akg_require(x):
    """The GPU holding the inputs has what the kernels were built for (checked once per device)."""
    if x.device.type != "cuda":
        return
    ok = _AKG_CAPABLE.get(x.device)
    if ok is None:
        (need, why, same), cap = _AKG_REQUIRES, torch.cuda.get_device_capability(x.device)
        ok = _AKG_CAPABLE[x.device] = cap >= need and (not same or cap[0] == need[0])
        if not ok:
            raise RuntimeError(f"this module's kernels need a GPU of compute capability {need[0]}.{need[1]}"
                               f"{' exactly' if same else ' or newer'} ({why}); {torch.cuda.get_device_name(x.device)} "
                               f"is {cap[0]}.{cap[1]}: translate it again with --target for this GPU")
'''


_LAST_FORMAT = {2: "torch.channels_last", 3: "torch.channels_last_3d"}


def torch_dtype(dt: str) -> str:
    return str(DTYPES[dt])


def library_line(step: LibraryCall, name: Callable[[Buf | None], str]) -> str:
    a = [name(b) for b in step.args]
    at = step.attrs
    if step.op in ("conv", "conv_transpose"):
        r = len(step.args[1].shape) - 2  # type: ignore[union-attr]
        x = a[0]
        w = a[1]
        if at["channels_last"]:  # (N, *spatial, C) held as torch's channels-last strides: a view, no copy
            x = f"{x}.movedim(-1, 1).contiguous(memory_format={_LAST_FORMAT[r]})"
            w = f"_akg_last({w}, {_LAST_FORMAT[r]})"
        if step.op == "conv":
            call = (f"F.conv{r}d({x}, {w}, {a[2] if len(a) > 2 else 'None'}, {list(at['stride'])}, "
                    f"{list(at['padding'])}, {list(at['dilation'])}, {at['groups']})")
        else:
            call = (f"F.conv_transpose{r}d({x}, {w}, {a[2] if len(a) > 2 else 'None'}, {list(at['stride'])}, "
                    f"{list(at['padding'])}, {list(at['output_padding'])}, {at['groups']}, {list(at['dilation'])})")
        return f"{call}.movedim(1, -1)" if at["channels_last"] else call
    if step.op in ("max_pool", "max_pool_indices"):
        r = len(at["kernel"])
        idx = ", return_indices=True)[1]" if step.op == "max_pool_indices" else ")"
        return (f"F.max_pool{r}d({a[0]}, {list(at['kernel'])}, {list(at['stride'])}, {list(at['padding'])}, "
                f"{list(at['dilation'])}, ceil_mode={at['ceil_mode']}{idx}")
    if step.op == "avg_pool":
        r = len(at["kernel"])
        extra = "" if r == 1 else f", divisor_override={at['divisor_override']}"
        return (f"F.avg_pool{r}d({a[0]}, {list(at['kernel'])}, {list(at['stride'])}, {list(at['padding'])}, "
                f"ceil_mode={at['ceil_mode']}, count_include_pad={at['count_include_pad']}{extra})")
    if step.op in ("adaptive_avg_pool", "adaptive_max_pool"):
        r = len(at["output_size"])
        kind = "avg" if step.op == "adaptive_avg_pool" else "max"
        return f"F.adaptive_{kind}_pool{r}d({a[0]}, {list(at['output_size'])})"
    if step.op in ("cumsum", "cumprod"):
        d, x = at["dim"], a[0]
        ident = 0.0 if step.op == "cumsum" else 1.0
        if at["reverse"]:
            x = f"{x}.flip({d})"
        if at["exclusive"]:
            x = (f"torch.cat([torch.full_like({x}.narrow({d}, 0, 1), {ident}), "
                 f"{x}.narrow({d}, 0, {x}.shape[{d}] - 1)], {d})")
        y = f"torch.{step.op}({x}, {d})"
        return f"{y}.flip({d})" if at["reverse"] else y
    line = _library_math(step, a)
    if line is not None:
        return line
    if step.op == "dropout":
        return f"F.dropout({a[0]}, {at['p']}, True)"
    if step.op == "random":  # the global generator, as the reference draws (same seed, same numbers)
        if at["dist"] == "bernoulli":
            return f"torch.empty({list(at['shape'])}, dtype={torch_dtype(at['dtype'])}, device=_akg_dev)" \
                f".bernoulli_({at['p']})"
        fn = "torch.randn" if at["dist"] == "normal" else "torch.rand"
        return f"{fn}({list(at['shape'])}, dtype={torch_dtype(at['dtype'])}, device=_akg_dev)"
    if step.op == "recurrence":  # torch's layer (cuDNN on NVIDIA GPUs): one persistent kernel per layer
        hx = f"[{a[1]}, {a[2]}]" if at["cell"] == "lstm" else a[1]
        result = RESULTS.index(at["result"])
        return (f"torch.ops.aten.{at['cell']}.input({a[0]}, {hx}, [{', '.join(a[3:])}], {at['has_biases']}, "
                f"{at['layers']}, 0.0, False, {at['bidirectional']}, {at['batch_first']})[{result}]")
    if step.op == "conv_weight_grad":
        return (f"torch.ops.aten.convolution_backward({a[0]}, {a[1]}, {a[2]}, None, {list(at['stride'])}, "
                f"{list(at['padding'])}, {list(at['dilation'])}, False, {[0] * len(at['stride'])}, {at['groups']}, "
                "[False, True, False])[1]")
    if step.op == "concat":  # many pieces (a recurrence's outputs): one copy each, by torch
        return f"torch.cat([{', '.join(a)}], {at['dim']})"
    if step.op == "opaque" and embedding_grad(step):  # one atomic scatter, or 2 MiB pages (`EMBEDDING_GRAD`)
        return f"_akg_embedding_grad({a[0]}, {a[1]}, {at['args'][2]})"
    if step.op == "opaque":  # an ATen op akg does not model, called as torch.export recorded it
        args = ", ".join(_opaque_arg(v, a) for v in at["args"])
        kwargs = "".join(f", {k}={_opaque_arg(v, a)}" for k, v in at["kwargs"])
        item = f"[{at['item']}]" if at.get("item", -1) >= 0 else ""
        return f"torch.ops.{at['target']}({args}{kwargs}){item}"
    raise NotImplementedError(f"no library rendering for {step.op}")


REDUCTIONS = ("sum", "mean", "amax", "amin")
# torch's call for each op a library strategy leaves to it (`ir.passes.library`) that is one call of its
# arguments (a) and attributes (at); reductions and attention, which need the shapes, are spelled below
TORCH_CALLS: dict[str, Callable[[list[str], dict[str, Any]], str]] = {
    "permute": lambda a, at: f"{a[0]}.permute({list(at['dims'])})",  # views only library calls read
    "slice": lambda a, at: f"{a[0]}[{', '.join([':'] * at['dim'] + [_span(at)])}]",
    "reshape": lambda a, at: f"{a[0]}.reshape({list(at['shape'])})",
    "matmul": lambda a, at: f"torch.matmul({a[0]}, {a[1]})",
    # contiguous: torch folds such an input's leading axes into one addmm (its bias in the GEMM); a strided
    # one (a recurrence's time-major output read batch-first) took matmul, then a pass adding the bias
    "linear": lambda a, at: f"F.linear({a[0]}.contiguous(), {a[1]}, {a[2] if len(a) > 2 else 'None'})",
    "argmax": lambda a, at: f"torch.argmax({a[0]}, {at['dim']}, {at['keepdim']})",
    "argmin": lambda a, at: f"torch.argmin({a[0]}, {at['dim']}, {at['keepdim']})",
    "softmax": lambda a, at: f"torch.softmax({a[0]}, {at['dim']})",
    "log_softmax": lambda a, at: f"torch.log_softmax({a[0]}, {at['dim']})",
    "logsumexp": lambda a, at: f"torch.logsumexp({a[0]}, {list(at['dims'])}, {at['keepdim']})",
    "layer_norm": lambda a, at: f"F.layer_norm({a[0]}, {list(at['normalized_shape'])}, {a[1]}, {a[2]}, {at['eps']})",
    "rms_norm": lambda a, at: f"F.rms_norm({a[0]}, {list(at['normalized_shape'])}, {a[1]}, {at['eps']})",
    "group_norm": lambda a, at: f"F.group_norm({a[0]}, {at['groups']}, {a[1]}, {a[2]}, {at['eps']})",
    # the input's own statistics, no running buffers touched
    "instance_norm": lambda a, at: f"F.instance_norm({a[0]}, None, None, {a[1]}, {a[2]}, True, 0.0, {at['eps']})",
    # args: x, weight, bias, running mean, running var; batch statistics where training (buffers not updated)
    "batch_norm": lambda a, at: (f"F.batch_norm({a[0]}, None, None, {a[1]}, {a[2]}, True, 0.0, {at['eps']})"
                                 if at["training"] or a[3] == "None" else
                                 f"F.batch_norm({a[0]}, {a[3]}, {a[4]}, {a[1]}, {a[2]}, False, 0.0, {at['eps']})"),
}


def _span(at: dict[str, Any]) -> str:
    return f"{at['start']}:{at['end']}" + (f":{at['step']}" if at["step"] != 1 else "")


def _library_math(step: LibraryCall, a: list[str]) -> str | None:
    """torch's call for an op a library strategy leaves to it: the table, reductions over resolved dims,
    attention; the same meaning as the interpreter's (a test checks each)."""
    at, op = step.attrs, step.op
    if op == "matmul":  # torch.matmul's own dispatch (expands, reshapes, then bmm) costs a call of this size
        ranks = [len(x.shape) for x in step.args[:2]]  # type: ignore[union-attr]
        if ranks == [2, 2]:
            return f"torch.mm({a[0]}, {a[1]})"
        if ranks == [3, 3] and step.args[0].shape[0] == step.args[1].shape[0]:  # type: ignore[union-attr]
            return f"torch.bmm({a[0]}, {a[1]})"
    if op in TORCH_CALLS:
        return TORCH_CALLS[op](a, at)
    if op in (*REDUCTIONS, "prod", "var", "std", "norm"):
        rank = len(step.args[0].shape)  # type: ignore[union-attr]
        dims = list(range(rank)) if at["dims"] is None else sorted(d % max(rank, 1) for d in at["dims"])
        if not dims:
            return f"{a[0]}.clone()"
        keep = at["keepdim"]
        if op in REDUCTIONS:
            return f"torch.{op}({a[0]}, {dims}, keepdim={keep})"
        if op in ("var", "std"):
            return f"torch.{op}({a[0]}, {dims}, correction={at['correction']}, keepdim={keep})"
        if op == "norm":
            return f"torch.linalg.vector_norm({a[0]}, {at['ord']}, {dims}, {keep})"
        x = a[0]  # torch.prod takes one dim at a time
        for d in reversed(dims):
            x = f"torch.prod({x}, {d}, keepdim=True)"
        kept = [s for i, s in enumerate(step.args[0].shape) if i not in dims]  # type: ignore[union-attr]
        return x if keep else f"{x}.reshape({kept})"
    if op == "attention":
        mask, causal = a[3] if len(a) > 3 else "None", at["causal"]
        if causal and mask != "None":  # SDPA takes one or the other: the causal triangle folded into the mask
            lq, lk = step.args[0].shape[-2], step.args[1].shape[-2]  # type: ignore[union-attr]
            tri = f"torch.ones({lq}, {lk}, dtype=torch.bool, device={mask}.device).tril()"
            mask = (f"({mask} & {tri})" if step.args[3].dtype == "bool"  # type: ignore[union-attr]
                    else f"{mask}.masked_fill(~{tri}, float('-inf'))")
            causal = False
        call = (f"F.scaled_dot_product_attention({a[0]}, {a[1]}, {a[2]}, attn_mask={mask}, "
                f"is_causal={causal}, scale={at['scale']})")
        if at.get("nan_rows") and mask != "None":  # a written softmax: NaN where every score is -inf, torch's 0
            if step.args[3].dtype == "bool":  # type: ignore[union-attr]  # no score is -inf
                return call
            return f"_akg_nan_rows({mask}, {call}, held={state_mask(step)})"
        return call
    return None


def _opaque_arg(v: Any, tensors: list[str]) -> str:
    """Source for an opaque op's argument, encoded as in `ir.lift` ("$3": its fourth tensor)."""
    if isinstance(v, str) and v.startswith("$") and v[1:].isdigit():
        return tensors[int(v[1:])]
    if isinstance(v, str):
        return repr(v[1:] if v.startswith("$$") else v)
    if isinstance(v, tuple):
        return "[" + ", ".join(_opaque_arg(x, tensors) for x in v) + "]"
    if isinstance(v, torch.dtype):
        return str(v)
    return repr(v)


def declared_calls(prog: KernelProgram) -> list[str]:
    out: list[str] = []
    for s in prog.library_calls():
        if s.op == "opaque":  # the op and the ATen ops it was recorded to run as
            op = ".".join(s.attrs["target"].split(".")[:2])
            extra = ("aten.zero_", "aten.index_add_") if embedding_grad(s) else ()  # `_akg_embedding_grad`'s
            out += [d for d in (op, *s.attrs.get("dispatch", ()), *extra) if d not in out]
        for d in LIBRARY_DECLARATIONS.get(s.op, []):
            if d not in out:
                out.append(d)
    return out


# a buffer this large is allocated on 2 MiB pages on the host: glibc maps every block of 32 MiB or more
# fresh, and a fresh 4 KiB-page buffer faults once per page on its first write, which cost several times the
# kernel's own time (docs/measured.md: "huge pages"). Smaller blocks come back from glibc's heap already
# touched: as fast either way in a loop (benchmarks/results/archive/cpu-huge-pages-steady-2026-11-29.txt),
# and marking them risks a stall while the kernel compacts memory for the huge page
def with_header(header: str, body: str) -> str:
    """A module's text: its header as comments, then the body `render_module` wrote (rendered once;
    the header, which carries the verdict, is only prepended)."""
    return "".join(f"# {ln}\n" if ln else "#\n" for ln in header.splitlines()) + body


def _envelope_shape(shape: tuple[int, ...]) -> tuple[int | str, ...]:
    """An input's shape as data: a run-time size (--dynamic) as its name."""
    return tuple(str(d)[len(PREFIX):] if isinstance(d, Dyn) else int(d) for d in shape)


def envelope(prog: KernelProgram, meta: dict[str, Any]) -> list[tuple[str, Buf | None, Any]]:
    """forward's parameters: (name, the input buffer it is, or None and the Python number it was traced
    with), in order."""
    bufs = {b.name: b for b in prog.inputs}
    sig = meta.get("signature") or [(b.name, b.name, None) for b in prog.inputs]
    return [(name, bufs[node] if node is not None else None, value) for name, node, value in sig]


Launch = Callable[[Kernel, Schedule, Callable[[Buf | None], str]], list[str]]
Bucket = tuple[int, KernelProgram, Schedules]  # (largest size, its program, its schedules)


class Writes(Protocol):
    """What the module writer calls of a backend (`base.BackendBase`)."""

    @property
    def manifest(self) -> Runs: ...

    def launch(self, k: Kernel, schedule: Schedule, ref: Callable[[Buf | None], str]) -> list[str]: ...

    def chains(self, prog: KernelProgram, schedules: Schedules) -> Sequence[Chain]:
        """Runs of kernels one call runs (`dsl_backends.chain`), as the backend's frame placed them."""
        ...


def write_module(prog: KernelProgram, schedules: Schedules, meta: dict[str, Any], frame: Framed, backend: Writes,
                 weights: dict[str, torch.Tensor], buckets: Sequence[Bucket] = ()) -> str:
    """The module's text (without its header): the backend's `frame` (`base.Frame`: imports, prelude, sources,
    requires) around its launches and chains (`Writes`). Its manifest's `devices`: the device types its
    launches accept; its `runtime`: the packages it needs (a missing one is a one-line error at import, naming
    the fix). `buckets` (--dynamic): programs for sizes up to each bound, tried in order before `prog`."""
    launch, plan, manifest = backend.launch, backend.chains, backend.manifest
    imports, prelude, sources, requires = frame.imports, frame.prelude, frame.sources, frame.requires
    devices, runtime = manifest.devices, manifest.runtime
    state = meta.get("state_dict", [])
    kinds = meta.get("param_kinds", {})
    embedded = {b.key: b for b in prog.params if kinds.get(b.key) in ("buffer_np", "constant")}
    lines = ["import importlib.util"] if runtime else []
    for m in runtime:
        lines += [f"if importlib.util.find_spec({m!r}) is None:",
                  f"    raise ImportError('this module runs its kernels with {m}, which is not installed here: "
                  f"pip install {m}, or translate it for another DSL')"]
    lines += ["import base64", "", "import torch", "import torch.nn as nn", "import torch.nn.functional as F"]
    lines += imports
    lines += ["", f"AKG_LIBRARY_CALLS = {declared_calls(prog)!r}", REGISTER]
    programs = [prog, *(bp for _, bp, _ in buckets)]
    embeddings = any(s.op == "opaque" and embedding_grad(s) for p in programs for s in p.library_calls())
    if embeddings or any(huge_allocation(b) for p in programs for k in p.kernels() for b in k.outs()):
        lines.append(HUGE_EMPTY)
    if embeddings:
        lines.append(EMBEDDING_GRAD)
    if any(nan_rows(s) for p in programs for s in p.library_calls()):
        lines.append(NAN_ROWS)
    if any(last_weight(s) for p in programs for s in p.library_calls()):
        lines.append(LAST_WEIGHTS)
    if prelude:
        lines.append(prelude)
    for src in sources.values():
        lines += ["", src]
    lines.append("_AKG_STATE = [")
    lines += [f"    ({k!r}, {tuple(shape)!r}, {torch_dtype(dt)}, {kind!r})," for k, shape, dt, kind in state]
    lines.append("]")
    lines.append("_AKG_EMBEDDED = {")
    for key, b in embedded.items():
        t = weights[key].detach().contiguous().cpu()
        data = base64.b64encode(t.numpy().tobytes() if t.dtype != torch.bfloat16 else
                                t.view(torch.int16).numpy().tobytes()).decode()
        lines.append(f"    {key!r}: ({data!r}, {torch_dtype(b.dtype)}, {tuple(b.shape)!r}, 'buffer_np'),")
    lines.append("}")
    env = envelope(prog, meta)
    dynamic = {k: dict(v) for k, v in (meta.get("dynamic") or {}).items()}
    if buckets:  # the verifier checks each bucket's edges too
        dynamic[next(iter(dynamic))]["buckets"] = [upper for upper, _, _ in buckets]
    lines.append("_AKG_ENVELOPE = [")
    lines += [f"    ({name!r}, {_envelope_shape(b.shape)!r}, {torch_dtype(b.dtype)}, None)," if b is not None else
              f"    ({name!r}, None, None, {value!r})," for name, b, value in env]
    lines += ["]", f"_AKG_DEVICES = {tuple(devices)!r}",
              f"_AKG_DYNAMIC = {({k: v['traced'] for k, v in dynamic.items()})!r}",
              "_AKG_FAST = None if _AKG_DYNAMIC or any(s is None for _, s, _, _ in _AKG_ENVELOPE) else \\",
              "    [(s, d) for _, s, d, _ in _AKG_ENVELOPE]",
              "_AKG_ON_CUDA, _AKG_ON_CPU = 'cuda' in _AKG_DEVICES, 'cpu' in _AKG_DEVICES",
              "# run-time sizes (--dynamic): per size, its largest (traced) value and where it appears among",
              "# forward's inputs as (argument, dimension); the verifier checks the module at sizes inside",
              f"AKG_DYNAMIC = {dynamic!r}"]
    if requires is not None:
        lines += [f"_AKG_REQUIRES = {tuple(requires.capability)!r}, {requires.why!r}, {requires.same_major!r}",
                  REQUIRE]
    ins = [b.name for b in prog.inputs]
    params = [name for name, _, _ in env]
    lines += ["", "", "class ModelNew(nn.Module):", "    def __init__(self, *args, **kwargs):",
              "        super().__init__()",
              "        for key, shape, dtype, kind in _AKG_STATE:",
              "            _akg_register(self, key, torch.zeros(shape, dtype=dtype), kind)",
              "        for key, (data, dtype, shape, kind) in _AKG_EMBEDDED.items():",
              "            _akg_register(self, key, _akg_const(data, dtype, shape), kind)", "",
              f"    def forward(self, {', '.join(params)}):"]
    body = _guard_lines(params, env, devices, bool(dynamic))
    body += [f"{PREFIX}{name} = _akg_s[{name!r}]" for name in dynamic]
    if requires is not None and ins:
        first = next(name for name, b, _ in env if b is not None)
        body.append(f"_akg_require({first})")
    if buckets:  # smaller sizes run kernels whose schedules were chosen for them
        size = PREFIX + next(iter(dynamic))
        for upper, bprog, bsched in buckets:
            body.append(f"if {size} <= {upper}:  # schedules chosen for sizes up to {upper}")
            body += ["    " + ln for ln in _steps(bprog, bsched, meta, env, launch, plan(bprog, bsched))]
    body += _steps(prog, schedules, meta, env, launch, plan(prog, schedules))
    lines += ["        " + ln for ln in body]
    return "\n".join(lines) + "\n"


def _guard_lines(params: list[str], env: list[tuple[str, Buf | None, Any]], devices: Sequence[str],
                 dynamic: bool) -> list[str]:
    """forward's first lines. Fixed sizes, tensors only: the envelope checked inline, `_akg_guard` (which names
    what differs) only where it fails; on a CPU host after a cache flush its call and loop cost ~8 us a call,
    the inline test ~4, a tenth of a small pointwise kernel's time."""
    call = f"{'_akg_s = ' if dynamic else ''}_akg_guard(({''.join(p + ', ' for p in params)}))"
    if dynamic or not env or any(b is None for _, b, _ in env) or not set(devices) <= {"cpu", "cuda"}:
        return [call]
    tests = [f"{name}.shape == {tuple(_envelope_shape(b.shape))!r} and {name}.dtype is {torch_dtype(b.dtype)} and "
             + (f"{name}.is_{devices[0]}" if len(devices) == 1 else f"({name}.is_cpu or {name}.is_cuda)")
             for name, b, _ in env if b is not None]
    return ["try:", "    _akg_ok = (" + " and\n               ".join(tests) + ")",
            "except AttributeError:  # not a tensor: the full check says so", "    _akg_ok = False",
            "if not _akg_ok:", f"    {call}"]


def _allocation(b: Buf, env: list[tuple[str, Buf | None, Any]], device: str) -> str:
    shape, dtype, size = tuple(b.shape), torch_dtype(b.dtype), huge_allocation(b)
    # an input of its shape and dtype (made contiguous above): empty_like parses no keywords, ~60% of
    # torch.empty's cost a call
    like = next((i.name for _, i, _ in env if i is not None and tuple(i.shape) == shape and i.dtype == b.dtype), None)
    return (f"{b.name} = _akg_empty({shape!r}, {dtype}, {device}, {size})" if size else
            f"{b.name} = torch.empty_like({like})" if like else
            f"{b.name} = torch.empty({shape!r}, dtype={dtype}, device={device})")


def _steps(prog: KernelProgram, schedules: Schedules, meta: dict[str, Any], env: list[tuple[str, Buf | None, Any]],
           launch: Launch, chains: Sequence[Chain] = ()) -> list[str]:
    """forward's lines that run `prog` after the guard: inputs made contiguous, parameters, each step (or
    each chain of steps, `chains`), the buffers forward writes, the return."""
    body: list[str] = []
    ins = [b.name for b in prog.inputs]
    names: dict[str, str] = {b.name: b.name for b in prog.inputs}
    for name, b, _ in env:
        if b is not None:
            body.append(f"{b.name} = {name}.contiguous()")
    dev = ins[0] if ins else "None"
    if any(isinstance(s, LibraryCall) and s.op == "random" for s in prog.steps):
        body.append(f"_akg_dev = {dev}.device" if ins else "_akg_dev = 'cpu'")
    for b in prog.params:
        body.append(f"{b.name} = _akg_get(self, {b.key!r}).contiguous()")
        names[b.name] = b.name

    def ref(b: Buf | None) -> str:
        return "None" if b is None else names[b.name]

    # a generated kernel indexes its inputs as contiguous; torch's calls take any strides (an attention's
    # output, say, comes back transposed in memory and is returned as it is, as eager returns it)
    by_kernels = {b.name for k in prog.kernels() for b in k.inputs()}
    # an attention's mask read through a view (T5's position bias, permuted): torch's CPU attention and
    # `_akg_nan_rows`' row maximum read a strided mask several times slower than a copy of it
    masks = {s.args[3].name for s in prog.library_calls()
             if s.op == "attention" and len(s.args) > 3 and s.args[3] is not None}
    device = f"{dev}.device" if ins else "'cpu'"
    # each intermediate deleted after the step that reads it last, as eager's frees are: a forward holding all
    # of them to its return grows the heap to their sum, which the allocator gives back at the return, and
    # every call then faults its pages in afresh (T5 on the CPU: ~7,000 faults a call, 10% of its time)
    keep = {b.name for b in (*prog.inputs, *prog.params, *prog.outputs)} | set(prog.aliases) | set(
        prog.aliases.values())
    last = {name: j for j, s in enumerate(prog.steps) for name in reads(s)}
    held: list[str] = []

    def free(upto: int) -> None:
        gone = [n for n in held if last.get(n, -1) <= upto]
        if gone:
            body.append(f"del {', '.join(gone)}")
            held[:] = [n for n in held if n not in gone]

    skip = 0
    for i, step in enumerate(prog.steps):
        chain = chain_at(chains, i)
        if chain is not None:  # one call runs its kernels; forward allocates what outlives it
            for b in chain.outputs:
                body.append(_allocation(b, env, device))
            args = [f"{ref(b)}.data_ptr()" for b in chain.inputs] + [f"{b.name}.data_ptr()" for b in chain.outputs]
            body.append(f"_AKG_LIB.{chain.name}({', '.join(args)})  # {chain.stop - chain.start} kernels")
            names.update((b.name, b.name) for b in chain.outputs)
            held.extend(b.name for b in chain.outputs if b.name not in keep)
            free(chain.stop - 1)
            skip = chain.stop
        if i < skip:
            continue
        if isinstance(step, LibraryCall) and step.out.name not in masks and (
                step.op in VIEW_OPS or step.out.name not in by_kernels):
            body.append(f"{step.out.name} = {library_line(step, ref)}")
        elif isinstance(step, LibraryCall):
            body.append(f"{step.out.name} = ({library_line(step, ref)}).contiguous()")
        else:
            for b in step.outs():
                if b is step.out and step.in_place:  # its operand's storage, dead after it (ir.kernel.inplace)
                    body.append(f"{b.name} = {names[step.in_place]}")
                    continue
                body.append(_allocation(b, env, device))
            body += launch(step, schedules[step.name], ref)
        made = step.outs() if isinstance(step, Kernel) else [step.out]
        names.update((b.name, b.name) for b in made)
        held.extend(b.name for b in made if b.name not in keep and b.name not in held)
        free(i)
    outs = [ref(b) for b in prog.outputs]
    mutations = meta.get("mutations", [])
    if mutations:  # buffers forward writes in place: the module keeps its own state the same way
        body += [f"_akg_get(self, {key!r}).copy_({o})" for key, o in zip(mutations, outs[len(outs) - len(mutations):])]
        outs = outs[:len(outs) - len(mutations)]
    single = meta.get("single_output", len(outs) == 1)
    body.append(f"return {outs[0]}" if single and len(outs) == 1 else f"return ({', '.join(outs)},)")
    return body


# a line in a C-family source between its prelude and kernels, and between kernels: `_akg_compile` builds
# the parts as translation units in parallel (a comment: the whole source still compiles as one)
UNIT = "// akg: unit\n"

# Python for a written module: build C-family source into a shared library once, cached on disk.
COMPILE_CACHED = '''
import ctypes as _ctypes
import hashlib as _hashlib
import os as _os
import subprocess as _subprocess
import threading as _threading
from pathlib import Path as _Path


_AKG_UNIT = "// akg: unit\\n"  # splits a source: the first part (its prelude) heads every unit


def _akg_units(src):
    """`src` as translation units to compile at once: the prelude with a share of its kernels each, as
    many as the CPUs this process may use (balanced by length), or `src` itself where it has no marks."""
    head, *parts = src.split(_AKG_UNIT)
    try:
        cpus = len(_os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cpus = _os.cpu_count() or 1
    n = min(len(parts), cpus)
    if n < 2:
        return [src]
    bins, sizes = [[] for _ in range(n)], [0] * n
    for part in sorted(parts, key=len, reverse=True):
        i = sizes.index(min(sizes))
        bins[i].append(part)
        sizes[i] += len(part)
    return [head + "".join(b) for b in bins]


def _akg_build(src, cmd, suffix, subdir, salt="", unkeyed=None, base=None):
    """`src` built by `cmd` (compiler and flags) into a shared library under `base` (default: akg's cache),
    cached by a hash of source, command and `salt`; its path. A concurrent build never sees half a library.
    A source marked in units compiles them in parallel (one large -O3 unit is most of a model's first call
    on the CPU) and links them. `unkeyed` gives flags that change how fast a compile runs, not what it builds
    (a precompiled header): called only when a build is needed, and not part of the key."""
    key = _hashlib.sha256((src + " ".join(cmd) + salt).encode()).hexdigest()[:20]
    root = _Path(base or _os.environ.get("AKG_CACHE_DIR", _Path.home() / ".cache" / "akg")) / subdir / key
    lib = root / "kernels.so"
    if not lib.exists():
        root.mkdir(parents=True, exist_ok=True)
        tag = f"{_os.getpid()}.{_threading.get_ident()}"  # concurrent builds never share a file
        code, tmp = root / f"kernels.{tag}{suffix}", root / f"kernels.{tag}.so"
        code.write_text(src)
        units, more = _akg_units(src), (unkeyed() if unkeyed else [])
        steps, made = [[[*cmd, *more, str(code), "-o", str(tmp)]]], []
        if len(units) > 1:
            for i, text in enumerate(units):
                made += [root / f"kernels.{tag}.{i}{suffix}", root / f"kernels.{tag}.{i}.o"]
                made[-2].write_text(text)
            steps = [[[*(c for c in cmd if c != "-shared"), *more, "-c", str(u), "-o", str(o)]
                      for u, o in zip(made[::2], made[1::2])], [[*cmd, *map(str, made[1::2]), "-o", str(tmp)]]]
        try:
            for step in steps:
                procs = [_subprocess.Popen(c, stdout=_subprocess.PIPE, stderr=_subprocess.PIPE, text=True)
                         for c in step]
                errs = [p.communicate()[1] for p in procs]  # all waited for, none left running
                bad = [e for p, e in zip(procs, errs) if p.returncode]
                if bad:
                    raise RuntimeError(f"{cmd[0]} failed: " + bad[0][-2000:])
        finally:
            for f in made:
                f.unlink(missing_ok=True)
        _os.replace(tmp, lib)
        _os.replace(code, root / f"kernels{suffix}")
    return str(lib)


def _akg_compile(src, cmd, suffix, subdir, salt="", unkeyed=None):
    """`_akg_build`'s library, loaded."""
    return _ctypes.CDLL(_akg_build(src, cmd, suffix, subdir, salt, unkeyed))
'''
