"""LayerNorm over the last dimension (gpu-sized, cast to bfloat16; written by benchmarks/realsize/make.py from
programs.py)."""
import torch
import torch.nn as nn
import torch.nn.functional as F

DTYPE = torch.bfloat16


class Float32Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln = nn.LayerNorm(8192)

    def forward(self, x):
        return self.ln(x)


class Model(Float32Model):
    def __init__(self, *args):
        super().__init__(*args)
        self.to(DTYPE)


def get_inputs():
    return [t.to(DTYPE) if t.is_floating_point() else t for t in [torch.randn(49152, 8192)]]


def get_init_inputs():
    return []
