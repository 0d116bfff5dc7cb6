"""C++ row kernels that read their own row sum's terms (softmax and what follows it): each term is
computed once, kept in the thread's scratch row for the output's sweep, and summed in fp32 chunks
added to a double."""

from __future__ import annotations

import importlib.util
import re

import torch

from akg_agent.translate import build, render
from akg_agent.verifier import verify
from dsl_backends.cpp.terms import CHUNK

HEADS = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.rand(3 * 1300) + 0.5)

    def forward(self, x, y, z, u):
        heads = (torch.softmax(x.reshape(40, 3, 1300), -1) * 2.0).reshape(40, 3 * 1300) * self.w
        return heads, torch.softmax(y, -1), torch.log_softmax(z, -1), u / (u * u).sum(-1, keepdim=True)


def get_inputs():
    return [torch.randn(40, 3 * 1300) * 4.0, torch.randn(64, 1300) * 4.0, torch.randn(64, 1300), torch.randn(64, 1300)]


def get_init_inputs():
    return []
'''


def _kernels(text: str) -> dict[str, str]:
    """Each generated C++ kernel's body by name."""
    parts = re.split(r'extern "C" (?:AKG_WIDE )?void ', text)[1:]
    return {part.split("(")[0]: part.split("\n}\n")[0] for part in parts}


def test_a_softmaxs_terms_are_computed_once_and_summed_in_fp32_chunks(tmp_path):
    """Rows of 1300 (two full chunks of 512 and a short one): the weighted head softmax and the plain
    softmax each compute exp once per element and read the kept terms in their output sweep; the log
    softmax (its output reads no term) and a norm whose term is not what the output reads keep their
    own loops. Verified; then rows of -inf, +inf and NaN behave as torch's."""
    path = tmp_path / "heads.py"
    path.write_text(HEADS)
    text = render(build(path, "cpp", "cpu", tuned=False))
    kernels = _kernels(text)
    kept = [name for name, body in kernels.items() if "akg_t[akg_col] = " in body]
    assert len(kept) == 2, list(kernels)
    for name in kept:
        body = kernels[name]
        assert body.count("expf(") == 1 and f"akg_kc += {CHUNK}" in body and "((float)(akg_t[akg_col])) /" in body
    # the plain softmax's terms in its output's row (stored in place); the head softmax's output is wider
    # than its rows of 1300 (3 heads a row of the [40, 3900] output): also its own rows, in place
    assert sum("float* akg_t = out + akg_row * 1300;" in kernels[name] for name in kept) == 2
    others = [b for n, b in kernels.items() if n not in kept]  # log-softmax, the norm: their own loops
    assert len(others) >= 2 and not any("akg_kc +=" in b or "akg_row_scratch" in b for b in others)
    cand = tmp_path / "cand.py"
    cand.write_text(text)
    v = verify(path, cand, target="cpu", seeds=(0, 1))
    assert v.accepted, v.line()
    spec = importlib.util.spec_from_file_location("terms_mod", cand)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    ref = mod.ModelNew()
    torch.manual_seed(0)
    x, y, z = torch.randn(40, 3 * 1300) * 4.0, torch.randn(64, 1300) * 4.0, torch.randn(64, 1300)
    y[1], y[2, 700], y[3, 5], y[4, 1299] = float("-inf"), float("inf"), float("nan"), 88.0
    got = ref(x, y, z, z)
    want = torch.softmax(y, -1)
    assert torch.equal(torch.isnan(got[1]), torch.isnan(want))  # the -inf row, the +inf and NaN rows
    ok = ~torch.isnan(want)
    assert torch.allclose(got[1][ok], want[ok], rtol=1e-5, atol=1e-7)
    assert got[1][4, 1299] > 0.99  # a term near exp's range kept exactly as the sum's
