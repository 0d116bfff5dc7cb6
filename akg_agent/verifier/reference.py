"""The reference's side of a check: its outputs as a list, inputs moved (and widened to float64), and
the float64 evaluation every candidate is judged against, placed on the device or the host by memory."""

from __future__ import annotations

import copy
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_map

from .candidate import first_line

LOW_FLOATS = (torch.float16, torch.bfloat16, torch.float32)


class _Widened(TorchDispatchMode):
    """Every floating-point value and every floating dtype an op names taken to float64: the program's own
    casts to bf16/fp16/fp32 (a graph dynamo captured from a bf16 model keeps `.to(torch.bfloat16)` as
    constants) become float64 too, so the float64 evaluation is the same program without its roundings."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[override]
        def widen(v: Any) -> Any:
            if isinstance(v, torch.Tensor) and v.dtype in LOW_FLOATS:
                return v.double()
            return torch.float64 if isinstance(v, torch.dtype) and v in LOW_FLOATS else v
        return func(*tree_map(widen, args), **tree_map(widen, kwargs or {}))


def run_float64(ref64: Any, inputs: list[Any], widen: bool = False) -> list[Any]:
    """The float64 module on float64 inputs; where its own casts mix dtypes (an op meets bf16 and float64), once
    more with every cast widened (`_Widened`). `widen`: widened from the start (a graph under autocast, whose
    casts to bf16 would otherwise run as torch does: no reference error at all, no floor)."""
    if widen:
        with _Widened():
            return outputs(ref64(*inputs))
    try:
        return outputs(ref64(*inputs))
    except RuntimeError:
        with _Widened():
            return outputs(ref64(*inputs))


def outputs(x: Any) -> list[torch.Tensor]:
    return list(x) if isinstance(x, (tuple, list)) else [x]


def to_device(x: Any, device: torch.device, double: bool = False) -> Any:
    if isinstance(x, torch.Tensor):
        x = x.to(device)
        return x.double() if double and x.is_floating_point() else x
    return x


def nbytes(x: Any) -> int:
    return x.numel() * x.element_size() if isinstance(x, torch.Tensor) else 0


def float64_home(device: torch.device, size: int) -> torch.device:
    """Where a float64 evaluation of a problem of `size` bytes (inputs and outputs) runs: on the device, or on
    the host when its copy (about 4x the problem) would not fit beside the candidate. What torch's allocator
    holds but no tensor uses counts as free: the evaluation allocates from it first."""
    if device.type != "cuda":
        return device
    free = torch.cuda.mem_get_info(device)[0] + torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device)
    return torch.device("cpu") if 4 * size > free else device


def timing_sets(requested: int, set_bytes: int, capacity: int | None) -> int:
    """How many input sets the timing rotates through: `requested`, fewer where together they would take
    more than an eighth of the device's `capacity` (bytes; None: no bound), at least one. At real sizes
    one set already defeats the caches, and every set held crowds out what the baselines allocate
    (max-autotune's benchmarks, CUDA-graph pools)."""
    if capacity is None or set_bytes <= 0:
        return requested
    return max(1, min(requested, capacity // 8 // set_bytes))


def float64_trial(ref64: Any, raw: list[Any], rng: int, device: torch.device, details: dict[str, Any],
                  size: int = 0, widen: bool = False) -> tuple[Any, list[Any] | None]:
    """The float64 reference on one input set of `size` bytes (inputs and outputs): the reference module,
    maybe moved, and its outputs, or None where it cannot run in float64. Where its copy would not fit on
    the device (`float64_home`), or the device runs out of memory for it, it moves to the host for this
    and later trials (recorded in `details`)."""
    if device.type == "cuda" and not details.get("float64_reference_on") and float64_home(device, size).type == "cpu":
        ref64, details["float64_reference_on"] = ref64.cpu(), "cpu"
    while True:
        dev64 = torch.device("cpu") if details.get("float64_reference_on") == "cpu" else device
        try:
            torch.manual_seed(rng)
            return ref64, run_float64(ref64, [to_device(x, dev64, double=True) for x in raw], widen)
        except torch.OutOfMemoryError:
            if dev64.type == "cpu":
                details["float64_reference_error"] = "out of host memory"
                return ref64, None
        except Exception as e:  # noqa: BLE001 - some references cannot run in float64: said in the verdict
            details["float64_reference_error"] = first_line(e)[:200]
            return ref64, None
        ref64, details["float64_reference_on"] = ref64.cpu(), "cpu"  # outside the handler: its frames freed


def float64_outputs(ref: Any, inputs: list[Any]) -> list[Any] | None:
    """The reference evaluated in float64 (on the host when its copy would not fit on the device, or when
    the device runs out of memory for it)."""
    dev = next((x.device for x in inputs if isinstance(x, torch.Tensor)), torch.device("cpu"))
    for home in dict.fromkeys([float64_home(dev, sum(nbytes(x) for x in inputs)), torch.device("cpu")]):
        try:
            ref64 = copy.deepcopy(ref).double().to(home)
            return run_float64(ref64, [to_device(x, home, double=True) for x in inputs])
        except torch.OutOfMemoryError:
            continue
        except Exception:  # noqa: BLE001 - some references cannot run in float64
            return None
    return None
