"""LayerNorm over the last dimension (gpu-sized; written by benchmarks/realsize/make.py from programs.py)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln = nn.LayerNorm(8192)

    def forward(self, x):
        return self.ln(x)


def get_inputs():
    return [torch.randn(49152, 8192)]


def get_init_inputs():
    return []
