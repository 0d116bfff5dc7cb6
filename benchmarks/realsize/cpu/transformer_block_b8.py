"""A pre-norm transformer encoder block (attention, LayerNorm, MLP, residuals) (cpu, batch 8-sized; written by benchmarks/realsize/make.py from programs.py)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.h = 8
        self.ln1 = nn.LayerNorm(512)
        self.qkv = nn.Linear(512, 3 * 512)
        self.proj = nn.Linear(512, 512)
        self.ln2 = nn.LayerNorm(512)
        self.fc1 = nn.Linear(512, 4 * 512)
        self.fc2 = nn.Linear(4 * 512, 512)

    def forward(self, x):
        b, s, e = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(e, dim=-1)
        q, k, v = (t.reshape(b, s, self.h, e // self.h).transpose(1, 2) for t in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, s, e)
        x = x + self.proj(a)
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


def get_inputs():
    return [torch.randn(8, 128, 512)]


def get_init_inputs():
    return []
