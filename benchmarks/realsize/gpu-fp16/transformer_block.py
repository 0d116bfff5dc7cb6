"""A pre-norm transformer encoder block (attention, LayerNorm, MLP, residuals) (gpu-sized, cast to float16; written by benchmarks/realsize/make.py from
programs.py)."""
import torch
import torch.nn as nn
import torch.nn.functional as F

DTYPE = torch.float16


class Float32Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.h = 16
        self.ln1 = nn.LayerNorm(1024)
        self.qkv = nn.Linear(1024, 3 * 1024)
        self.proj = nn.Linear(1024, 1024)
        self.ln2 = nn.LayerNorm(1024)
        self.fc1 = nn.Linear(1024, 4 * 1024)
        self.fc2 = nn.Linear(4 * 1024, 1024)

    def forward(self, x):
        b, s, e = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(e, dim=-1)
        q, k, v = (t.reshape(b, s, self.h, e // self.h).transpose(1, 2) for t in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, s, e)
        x = x + self.proj(a)
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class Model(Float32Model):
    def __init__(self, *args):
        super().__init__(*args)
        self.to(DTYPE)


def get_inputs():
    return [t.to(DTYPE) if t.is_floating_point() else t for t in [torch.randn(16, 512, 1024)]]


def get_init_inputs():
    return []
