"""A ResNet basic block (conv-bn-relu, conv-bn, identity, relu) (cpu-sized; written by benchmarks/realsize/make.py from programs.py)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(64, 64, 3, padding=1, bias=False)
        self.b1 = nn.BatchNorm2d(64)
        self.c2 = nn.Conv2d(64, 64, 3, padding=1, bias=False)
        self.b2 = nn.BatchNorm2d(64)

    def forward(self, x):
        y = torch.relu(self.b1(self.c1(x)))
        return torch.relu(self.b2(self.c2(y)) + x)


def get_inputs():
    return [torch.randn(32, 64, 28, 28)]


def get_init_inputs():
    return []
