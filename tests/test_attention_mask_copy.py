"""An attention's additive mask read through a view (T5's position bias, an embedding permuted to heads
first) is copied once before the attention: torch's CPU attention and the written softmax's NaN-row check
read the strided mask several times slower (a row maximum 420 us against 13 on the AVX-512 host). Forced
to the library here: at these sizes the planner writes its own attention, which indexes the view itself."""

from __future__ import annotations

import torch

from .helpers import import_written, problem_namespace, translated_cpp

BIAS = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(128, 128, 8))  # (query, key, head), as T5's table lookup returns

    def forward(self, q, k, v):
        scores = torch.matmul(q, k.transpose(-1, -2)) + self.bias.permute(2, 0, 1).unsqueeze(0)
        return torch.matmul(scores.softmax(-1), v)


def get_inputs():
    return [torch.randn(2, 8, 128, 64), torch.randn(2, 8, 128, 64), torch.randn(2, 8, 128, 64)]


def get_init_inputs():
    return []
'''


def test_a_permuted_mask_is_made_contiguous_once_before_the_attention(tmp_path, monkeypatch):
    _, _, src = translated_cpp(tmp_path, monkeypatch, BIAS, "bias", library=("attention",))
    forward = src[src.index("    def forward"):]
    call = next(ln for ln in forward.splitlines() if "scaled_dot_product_attention" in ln)
    mask = call.split("attn_mask=")[1].split(",")[0]
    line = next(ln for ln in forward.splitlines() if ln.strip().startswith(f"{mask} = "))
    assert line.rstrip().endswith(".contiguous()"), line
    ns = problem_namespace(BIAS)
    torch.manual_seed(0)
    model, xs = ns["Model"](), ns["get_inputs"]()
    new = import_written(tmp_path, src, "bias_m").ModelNew()
    new.load_state_dict(model.state_dict())
    torch.testing.assert_close(new(*xs), model(*xs))
