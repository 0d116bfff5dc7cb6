"""GroupNorm, 8 groups (cpu-sized; written by benchmarks/realsize/make.py from programs.py)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.gn = nn.GroupNorm(8, 64)

    def forward(self, x):
        return self.gn(x)


def get_inputs():
    return [torch.randn(192, 64, 64, 64)]


def get_init_inputs():
    return []
