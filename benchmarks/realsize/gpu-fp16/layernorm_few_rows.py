"""Layer norm over each sample's (C, H, W): few rows, each millions long (gpu-sized, cast to float16; written by benchmarks/realsize/make.py from
programs.py)."""
import torch
import torch.nn as nn
import torch.nn.functional as F

DTYPE = torch.float16


class Float32Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln = nn.LayerNorm([64, 256, 256])

    def forward(self, x):
        return self.ln(x)


class Model(Float32Model):
    def __init__(self, *args):
        super().__init__(*args)
        self.to(DTYPE)


def get_inputs():
    return [t.to(DTYPE) if t.is_floating_point() else t for t in [torch.randn(16, 64, 256, 256)]]


def get_init_inputs():
    return []
