"""A candidate module as the worker meets it: loaded from its file (each failure one line), its outputs
fingerprinted and compared in chunks."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import torch

from .policy import Reject, TolerancePolicy, compare


def first_line(e: BaseException) -> str:
    msg = str(e).strip().splitlines()
    return f"{type(e).__name__}: {msg[0] if msg else ''}".rstrip(": ")


def load_candidate(path: Path, name: str = "akg_candidate", modelnew: bool = True) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    try:
        spec.loader.exec_module(mod)
    except SyntaxError as e:
        raise Reject("compile_error", f"candidate does not compile: line {e.lineno}: {e.msg}") from None
    except Exception as e:  # noqa: BLE001 - candidate code may raise anything
        raise Reject("import_error", f"importing the candidate raised {first_line(e)}") from None
    if modelnew and not hasattr(mod, "ModelNew"):
        raise Reject("no_modelnew", "the candidate defines no ModelNew")
    return mod


CHUNK = 1 << 22  # elements compared at once: the float64 copies a comparison makes stay this size


_BITS = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
_WEIGHTS: dict[tuple[str, int], torch.Tensor] = {}  # per device and chunk length: the position weights


def _weights(device: torch.device) -> torch.Tensor:
    key = (str(device), CHUNK)
    if key not in _WEIGHTS:  # made once: a fingerprint per input per trial reads them (weights are inputs too)
        _WEIGHTS[key] = (torch.arange(CHUNK, device=device, dtype=torch.int64) * 2654435761) % 1000003 + 1
    return _WEIGHTS[key]


def fingerprint(x: Any) -> Any:
    """A tensor's identity for the replay and input-mutation checks without keeping a copy: its type, and
    the plain and position-weighted sums of its elements' bit patterns as integers (exact, and NaN a value
    like any other), in chunks, each chunk's weighted sum scaled by its place. Reading the bits rather than
    the values in float64 costs a fraction: a dynamo graph's inputs are the model's weights, fingerprinted
    before and after each trial (5 of the 8 s a BERT graph's verification took)."""
    if not isinstance(x, torch.Tensor):
        return x
    flat = x.detach().reshape(-1)
    bits = _BITS.get(flat.element_size()) if not flat.is_complex() else None
    if bits is None:  # complex values: their real and imaginary parts
        return (str(x.dtype), tuple(x.shape), fingerprint(torch.view_as_real(flat)))
    flat = flat.view(bits)
    s1 = s2 = 0
    w = _weights(flat.device)
    for k, lo in enumerate(range(0, flat.numel(), CHUNK)):
        v = flat[lo:lo + CHUNK].to(torch.int64)
        s1 += int(v.sum())
        s2 += (k + 1) * int((v * w[:v.numel()]).sum())
    return (str(x.dtype), tuple(x.shape), s1, s2)


def compare_chunked(c: torch.Tensor, r: torch.Tensor, policy: TolerancePolicy, r64: torch.Tensor | None) -> Any:
    return compare(c, r, policy, r64, chunk=CHUNK)
