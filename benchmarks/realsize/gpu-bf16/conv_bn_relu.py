"""Conv2d, BatchNorm (eval), ReLU (gpu-sized, cast to bfloat16; written by benchmarks/realsize/make.py from
programs.py)."""
import torch
import torch.nn as nn
import torch.nn.functional as F

DTYPE = torch.bfloat16


class Float32Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(64, 128, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(128)

    def forward(self, x):
        return torch.relu(self.bn(self.conv(x)))


class Model(Float32Model):
    def __init__(self, *args):
        super().__init__(*args)
        self.to(DTYPE)


def get_inputs():
    return [t.to(DTYPE) if t.is_floating_point() else t for t in [torch.randn(64, 64, 112, 112)]]


def get_init_inputs():
    return []
