"""A ResNet basic block (conv-bn-relu, conv-bn, identity, relu) (gpu-sized, cast to bfloat16; written by benchmarks/realsize/make.py from
programs.py)."""
import torch
import torch.nn as nn
import torch.nn.functional as F

DTYPE = torch.bfloat16


class Float32Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(128, 128, 3, padding=1, bias=False)
        self.b1 = nn.BatchNorm2d(128)
        self.c2 = nn.Conv2d(128, 128, 3, padding=1, bias=False)
        self.b2 = nn.BatchNorm2d(128)

    def forward(self, x):
        y = torch.relu(self.b1(self.c1(x)))
        return torch.relu(self.b2(self.c2(y)) + x)


class Model(Float32Model):
    def __init__(self, *args):
        super().__init__(*args)
        self.to(DTYPE)


def get_inputs():
    return [t.to(DTYPE) if t.is_floating_point() else t for t in [torch.randn(64, 128, 56, 56)]]


def get_init_inputs():
    return []
