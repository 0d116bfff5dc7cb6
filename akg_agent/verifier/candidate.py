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


def fingerprint(x: Any) -> Any:
    """A tensor's identity for the replay and input-mutation checks without keeping a copy: its type,
    its sum and a position-weighted sum in float64 (NaNs as a value of their own), in chunks."""
    if not isinstance(x, torch.Tensor):
        return x
    flat = x.detach().reshape(-1)
    s1 = s2 = 0.0
    for lo in range(0, flat.numel(), CHUNK):
        v = torch.nan_to_num(flat[lo:lo + CHUNK].double(), nan=1.2345e300)
        w = ((torch.arange(lo, lo + v.numel(), device=v.device, dtype=torch.float64) * 2654435761) % 1000003) / 1000003
        s1 += float(v.sum())
        s2 += float((v * (w + 0.5)).sum())
    return (str(x.dtype), tuple(x.shape), s1, s2)


def compare_chunked(c: torch.Tensor, r: torch.Tensor, policy: TolerancePolicy, r64: torch.Tensor | None) -> Any:
    return compare(c, r, policy, r64, chunk=CHUNK)
