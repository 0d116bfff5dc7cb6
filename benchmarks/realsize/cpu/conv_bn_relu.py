"""Conv2d, BatchNorm (eval), ReLU (cpu-sized; written by benchmarks/realsize/make.py from programs.py)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(32, 64, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(64)

    def forward(self, x):
        return torch.relu(self.bn(self.conv(x)))


def get_inputs():
    return [torch.randn(24, 32, 56, 56)]


def get_init_inputs():
    return []
