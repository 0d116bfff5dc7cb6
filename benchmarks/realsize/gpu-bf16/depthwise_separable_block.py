"""Depthwise 3x3 conv, BatchNorm, ReLU, pointwise 1x1 conv, BatchNorm, ReLU (gpu-sized, cast to bfloat16; written by benchmarks/realsize/make.py from
programs.py)."""
import torch
import torch.nn as nn
import torch.nn.functional as F

DTYPE = torch.bfloat16


class Float32Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.dw = nn.Conv2d(128, 128, 3, padding=1, groups=128, bias=False)
        self.b1 = nn.BatchNorm2d(128)
        self.pw = nn.Conv2d(128, 256, 1, bias=False)
        self.b2 = nn.BatchNorm2d(256)

    def forward(self, x):
        return torch.relu(self.b2(self.pw(torch.relu(self.b1(self.dw(x))))))


class Model(Float32Model):
    def __init__(self, *args):
        super().__init__(*args)
        self.to(DTYPE)


def get_inputs():
    return [t.to(DTYPE) if t.is_floating_point() else t for t in [torch.randn(32, 128, 112, 112)]]


def get_init_inputs():
    return []
