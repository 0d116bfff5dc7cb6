"""The verifier at a size that used to exhaust the GPU: softmax over 8192 rows of 262144 (8.6 GB in,
8.6 GB out). Prints the verdict, where the float64 reference ran, and the verifier's peak GPU memory
as a multiple of the problem's footprint. python benchmarks/gpu/verify_memory.py OUT.json"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

from akg_agent.translate import translate
from akg_agent.verifier import verify

PROBLEM = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=1)


def get_inputs():
    return [torch.randn(8192, 262144)]


def get_init_inputs():
    return []
'''


def main(out: str) -> None:
    with tempfile.TemporaryDirectory() as d:
        prob, cand = Path(d) / "softmax_8192x262144.py", Path(d) / "cand.py"
        prob.write_text(PROBLEM)
        translate(prob, "triton", "h100", out=cand, verify_result=False)
        t0 = time.perf_counter()
        v = verify(prob, cand, target="h100", seeds=(0,))
        keys = ("footprint_bytes", "peak_bytes", "peak_over_footprint", "float64_reference_on")
        rec = {"verdict": v.line(), "verify_s": time.perf_counter() - t0, **{k: v.details.get(k) for k in keys}}
    print(json.dumps(rec))
    Path(out).write_text(json.dumps(rec, indent=1))


if __name__ == "__main__":
    main(sys.argv[1])
