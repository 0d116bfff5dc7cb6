"""BatchNorm2d (eval statistics) (cpu-sized; written by benchmarks/realsize/make.py from programs.py)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.bn = nn.BatchNorm2d(64)

    def forward(self, x):
        return self.bn(x)


def get_inputs():
    return [torch.randn(160, 64, 64, 64)]


def get_init_inputs():
    return []
