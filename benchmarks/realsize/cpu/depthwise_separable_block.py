"""Depthwise 3x3 conv, BatchNorm, ReLU, pointwise 1x1 conv, BatchNorm, ReLU (cpu-sized; written by benchmarks/realsize/make.py from programs.py)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.dw = nn.Conv2d(64, 64, 3, padding=1, groups=64, bias=False)
        self.b1 = nn.BatchNorm2d(64)
        self.pw = nn.Conv2d(64, 128, 1, bias=False)
        self.b2 = nn.BatchNorm2d(128)

    def forward(self, x):
        return torch.relu(self.b2(self.pw(torch.relu(self.b1(self.dw(x))))))


def get_inputs():
    return [torch.randn(14, 64, 56, 56)]


def get_init_inputs():
    return []
