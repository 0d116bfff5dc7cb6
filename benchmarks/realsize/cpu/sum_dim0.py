"""Sum over the leading dimension (cpu-sized; written by benchmarks/realsize/make.py from programs.py)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x.sum(0)


def get_inputs():
    return [torch.randn(192, 512, 512)]


def get_init_inputs():
    return []
