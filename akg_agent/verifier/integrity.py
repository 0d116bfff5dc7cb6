"""What the harness relies on, recorded before any candidate code is imported and checked after: the
clocks, the statistics, torch's functions and `Tensor` methods, the verifier's own modules, torch's
global numerics and threading settings, the dispatcher's kernels and the mode stacks.

A candidate runs in the verifier's process (it must, to be timed as users will call it), so its Python
can replace any of these (a `time.perf_counter` that leaves out the time spent in its own forward). The
timer reads references taken at import (`timing.py`), so a replacement changes no figure; this check names
it, as a rejection, wherever it happened."""

from __future__ import annotations

import builtins
import ctypes
import hashlib
import sys
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import torch
import torch._dynamo

from .policy import Reject

# modules whose every top-level name the harness may call (the verifier's own are added by name)
WATCHED_MODULES = ("time", "statistics", "json", "math", "os", "gc", "threading", "torch", "torch.nn.functional",
                   "torch.cuda", "torch.backends.cuda", "torch.backends.cudnn", "torch.testing",
                   "torch.utils._python_dispatch")
VERIFIER_MODULES = ("akg_agent.verifier.worker", "akg_agent.verifier.timing", "akg_agent.verifier.policy",
                    "akg_agent.verifier.guard", "akg_agent.verifier.reference", "akg_agent.verifier.sizes",
                    "akg_agent.verifier.integrity", "akg_agent.verifier.window", "akg_agent.verifier.timed",
                    "akg_agent.verifier.candidate", "akg_agent.verifier.jax_check")


def _classes() -> dict[str, Any]:
    """Classes whose methods the harness calls (on a tensor, a module, an event, a guard)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    return {"torch.Tensor": torch.Tensor, "torch._C.TensorBase": torch._C.TensorBase,
            "torch.nn.Module": torch.nn.Module, "torch.cuda.Event": torch.cuda.Event,
            "torch.cuda.Stream": torch.cuda.Stream, "TorchDispatchMode": TorchDispatchMode,
            "torch.Generator": torch.Generator}


SETTINGS: dict[str, Callable[[], Any]] = {
    # what changes the reference's numerics or speed without replacing a function
    "torch.get_num_threads()": torch.get_num_threads,
    "torch.get_num_interop_threads()": torch.get_num_interop_threads,
    "torch.get_float32_matmul_precision()": torch.get_float32_matmul_precision,
    "torch.backends.cuda.matmul.allow_tf32": lambda: torch.backends.cuda.matmul.allow_tf32,
    "torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction":
        lambda: torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction,
    "torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction":
        lambda: torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction,
    "torch.backends.cudnn.allow_tf32": lambda: torch.backends.cudnn.allow_tf32,
    "torch.backends.cudnn.enabled": lambda: torch.backends.cudnn.enabled,
    "torch.backends.cudnn.benchmark": lambda: torch.backends.cudnn.benchmark,
    "torch.backends.mkldnn.enabled": lambda: torch.backends.mkldnn.enabled,
    "torch.get_default_dtype()": torch.get_default_dtype,
    "torch.are_deterministic_algorithms_enabled()": torch.are_deterministic_algorithms_enabled,
    "torch function modes": torch._C._len_torch_function_stack,
    "torch dispatch modes": torch._C._len_torch_dispatch_stack,
    "persisting L2 cache limit": lambda: _persisting_l2(),
    "sys.gettrace()": sys.gettrace,
    "sys.getprofile()": sys.getprofile,
    "threading.settrace": lambda: threading.gettrace(),
}


def _persisting_l2() -> int:
    """The CUDA context's persisting-L2 carve-out (bytes): lines marked persisting survive the timer's cache
    flush. 0 where no CUDA context is current (a CPU run, or before the device is first used)."""
    if not torch.cuda.is_initialized():
        return 0
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return 0
    value = ctypes.c_size_t(0)
    return int(value.value) if cuda.cuCtxGetLimit(ctypes.byref(value), 0x06) == 0 else 0


def _settle_torch() -> None:
    """What torch replaces of itself on first use, done before a snapshot: importing dynamo wraps
    `torch.manual_seed`, its first compile wraps `nn.Module.__init__` and `__setstate__` (a baseline's
    torch.compile, or a candidate's own, is no tampering)."""
    try:
        from torch._dynamo.mutation_guard import install_generation_tagging_init
    except ImportError:  # another torch: its first compile would be reported, never missed
        return
    install_generation_tagging_init()


def _read(setting: Callable[[], Any]) -> Any:
    """A setting's value, or what it raised (a setting made unreadable is changed too: torch refuses to
    read the matmul precision once the legacy and the new switches have both been set)."""
    try:
        return setting()
    except Exception as e:  # noqa: BLE001
        return f"unreadable: {type(e).__name__}"


def _entries(owner: Any) -> dict[str, Any]:
    try:
        return dict(vars(owner))
    except TypeError:
        return {}


def _dispatch_digest() -> str:
    """One hash over the dispatcher's kernel table of every aten op: a kernel registered over torch's own
    (torch.library's IMPL, a C++ extension's TORCH_LIBRARY_IMPL) changes it."""
    h = hashlib.sha256()
    for name in sorted(torch._C._dispatch_get_all_op_names()):
        if name.startswith("aten::"):
            h.update(torch._C._dispatch_dump(name).encode())
    return h.hexdigest()


def _describe(value: Any) -> str:
    return getattr(value, "__qualname__", None) or type(value).__name__


@dataclass
class Snapshot:
    """The harness's world as it stood when taken (`take`); `changes` lists what differs now."""

    objects: dict[str, tuple[Any, dict[str, Any]]] = field(default_factory=dict)  # label -> (owner, its names)
    settings: dict[str, Any] = field(default_factory=dict)
    dispatch: str = ""
    modules: dict[str, ModuleType] = field(default_factory=dict)

    @classmethod
    def take(cls, extra_modules: Iterable[str] = ()) -> Snapshot:
        _settle_torch()
        s = cls()
        for name in (*WATCHED_MODULES, *VERIFIER_MODULES, *extra_modules):
            mod = sys.modules.get(name)
            if mod is not None:
                s.modules[name] = mod
                s.objects[name] = (mod, _entries(mod))
        s.objects["builtins"] = (builtins, _entries(builtins))
        for label, cls_ in _classes().items():
            s.objects[label] = (cls_, _entries(cls_))
        s.settings = {k: _read(read) for k, read in SETTINGS.items()}
        s.dispatch = _dispatch_digest()
        return s

    def changes(self, dispatch: bool = False) -> list[str]:
        """What was replaced, removed or changed since `take`, as 'time.perf_counter' style names
        (`dispatch`: also the dispatcher's table, 50 ms, so checked at fewer points)."""
        out = [f"sys.modules[{name!r}]" for name, mod in self.modules.items() if sys.modules.get(name) is not mod]
        for label, (owner, was) in self.objects.items():
            now = _entries(owner)
            for key, value in was.items():
                if key not in now:
                    out.append(f"{label}.{key} (removed)")
                elif now[key] is not value and not (label not in VERIFIER_MODULES and _is_data(now[key], value)):
                    out.append(f"{label}.{key}")
        for key, value in self.settings.items():
            now = _read(SETTINGS[key])
            if now != value:
                out.append(f"{key} ({value!r} -> {now!r})")
        if dispatch and _dispatch_digest() != self.dispatch:
            out.append("the dispatcher's kernel table (an aten op's kernel was replaced)")
        return out


# attributes of torch and the standard library that hold plain data the libraries update as they run
# (counters, caches, lazily filled registries): state, not behaviour; what changes behaviour through
# them is in SETTINGS. The verifier's own modules are held to every name.
_DATA = (int, float, str, bytes, bool, type(None), dict, list, set, tuple, frozenset)


def _is_data(a: Any, b: Any) -> bool:
    return isinstance(a, _DATA) and isinstance(b, _DATA)


def replaced(snapshot: Snapshot, where: str, dispatch: bool = False) -> str | None:
    """A one-line reason naming what was replaced, or None."""
    got = snapshot.changes(dispatch)
    if not got:
        return None
    more = f" and {len(got) - 3} more" if len(got) > 3 else ""
    return f"the candidate replaced {', '.join(got[:3])}{more} ({where}): the harness's clocks, statistics and torch " \
           "must stay the originals"



class Sentry:
    """The snapshot taken at worker start, checked where the candidate has just run: after its import,
    its construction, each call, each timing turn. Each failure is a `Reject` naming what it found."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot

    def check(self, where: str, dispatch: bool = False) -> None:
        reason = replaced(self.snapshot, where, dispatch)
        if reason:
            raise Reject("tampered", reason)

    def after_call(self, where: str, threads_before: set[threading.Thread], out: list[Any]) -> None:
        """A call returned: nothing replaced, no thread of its still running (work it left behind escapes
        the timer and races the comparison), outputs that are plain tensors (a subclass can compute on
        demand, when it is read, outside the timed call)."""
        self.check(where)
        left = [t for t in threading.enumerate() if t not in threads_before and t.is_alive()]
        if left:
            names = ", ".join(sorted(t.name for t in left)[:3])
            raise Reject("threads", f"ModelNew.forward left {len(left)} thread(s) running after it returned "
                                    f"({names}; {where}): work outside the call escapes the timer")
        for i, o in enumerate(out):
            if isinstance(o, torch.Tensor) and type(o) not in (torch.Tensor, torch.nn.Parameter):
                raise Reject("output_type", f"output {i} is a {type(o).__qualname__}, not a plain torch.Tensor "
                                            f"({where}): a lazy or wrapped value computes outside the call")
