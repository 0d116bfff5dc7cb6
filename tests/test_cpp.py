"""C++ specifics: the blocked GEMM's edges (row, column and K tails; blocks spanning batches)."""

from __future__ import annotations

import pytest

from akg_agent.translate import build, render
from akg_agent.verifier import verify

LINEAR = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(300, 37)

    def forward(self, x):
        return torch.tanh(self.fc(x * 0.5))


def get_inputs():
    return [torch.randn(13, 300)]


def get_init_inputs():
    return []
'''

BMM = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.bmm(a, b) + 1.0


def get_inputs():
    return [torch.randn(3, 5, 70), torch.randn(3, 70, 19)]


def get_init_inputs():
    return []
'''


@pytest.mark.parametrize("src", [LINEAR, BMM], ids=["linear", "bmm"])
@pytest.mark.parametrize("tile", [None, {"MR": 4, "NR": 8, "NB": 16, "KC": 32}], ids=["default", "small"])
def test_blocked_gemm_edges(src, tile, tmp_path):
    path = tmp_path / "p.py"
    path.write_text(src)
    t = build(path, "cpp", "cpu")
    [k] = [k for k in t.program.kernels() if k.kind == "matmul"]
    assert {"MR", "NR", "NB", "KC"} <= set(t.schedules[k.name])
    if tile:  # several column blocks and K panels, tails everywhere, row blocks across batches
        t.schedules[k.name] = t.schedules[k.name].replace(**tile)
    s = t.schedules[k.name]
    text = render(t)
    assert f"akg_c[{s['MR']}][{s['NR']}]" in text
    cand = tmp_path / "cand.py"
    cand.write_text(text)
    v = verify(path, cand, target="cpu", seeds=(0, 1))
    assert v.accepted, v.line()
