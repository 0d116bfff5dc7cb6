"""Conv2d, ReLU, add a per-channel bias, scale (cpu-sized; written by benchmarks/realsize/make.py from programs.py)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(32, 64, 3, padding=1)
        self.bias = nn.Parameter(torch.randn(64, 1, 1) * 0.1)

    def forward(self, x):
        return (torch.relu(self.conv(x)) + self.bias) * 2.0


def get_inputs():
    return [torch.randn(24, 32, 56, 56)]


def get_init_inputs():
    return []
