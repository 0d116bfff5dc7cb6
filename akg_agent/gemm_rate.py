"""`akg hw calibrate`'s measure of the backends' own GEMMs on this host: a compute-bound fp32 linear layer
translated pure (every GEMM generated, its weights kept packed), verified and timed by the verifier (in its
sandbox, by the one timing protocol), as a fraction of the host's compute peak. The cost model then weighs
the library's GEMM against this figure rather than the manifest's, which was measured on another host."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from dsl_backends import available
from ir.errors import AkgError

from .translate import build, render
from .verifier import verify

PROBLEM = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear({k}, {n}, bias=False)

    def forward(self, x):
        return self.fc(x)


def get_inputs():
    return [torch.randn({m}, {k})]


def get_init_inputs():
    return []
'''


def generated_gemm_figures(model: Any, quick: bool) -> dict[str, float]:
    """`library.generated_gemm_<dsl>` for each backend that runs natively on this CPU and states a GEMM
    efficiency for it. GPU backends' GEMMs are not measured here (their manifests' figures stay)."""
    peak = model.peak("vector", "f32") if model.kind == "cpu" else None
    if not peak:
        return {}
    m, k, n = (128, 256, 256) if quick else (512, 1024, 1024)
    out: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="akg-gemm-rate-") as tmp:
        problem = Path(tmp) / "linear.py"
        problem.write_text(PROBLEM.format(m=m, k=k, n=n))
        for name, man in sorted(available().items()):
            if "cpu" not in man.gemm_efficiency or man.executor(model, True) != "native":
                continue
            cand = Path(tmp) / f"{name.replace('-', '_')}.py"
            try:
                cand.write_text(render(build(problem, name, "cpu", tuned=False, pure=True)))
            except AkgError:
                continue  # this backend writes no GEMM for it: its manifest's figure stays
            v = verify(problem, cand, target="cpu", seeds=(0,), timing=True, trials=5 if quick else 15)
            sec = ((v.details.get("timing") or {}).get("candidate") or {}).get("median_s")
            if v.accepted and sec:
                out[f"library.generated_gemm_{name}"] = 2 * m * k * n / sec / peak
    return out
