"""LayerNorm over the last dimension (cpu-sized; written by benchmarks/realsize/make.py from programs.py)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln = nn.LayerNorm(4096)

    def forward(self, x):
        return self.ln(x)


def get_inputs():
    return [torch.randn(8192, 4096)]


def get_init_inputs():
    return []
