"""Conv2d, BatchNorm (eval), ReLU (gpu-sized; written by benchmarks/realsize/make.py from programs.py)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(64, 128, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(128)

    def forward(self, x):
        return torch.relu(self.bn(self.conv(x)))


def get_inputs():
    return [torch.randn(64, 64, 112, 112)]


def get_init_inputs():
    return []
