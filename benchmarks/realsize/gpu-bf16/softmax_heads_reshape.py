"""Softmax over each head's slice of a row, scaled per column, returned in the input's shape (gpu-sized, cast to bfloat16; written by benchmarks/realsize/make.py from
programs.py)."""
import torch
import torch.nn as nn
import torch.nn.functional as F

DTYPE = torch.bfloat16


class Float32Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.rand(16 * 4096) + 0.5)

    def forward(self, x):
        return (torch.softmax(x.reshape(2048, 16, 4096), -1) * 2.0).reshape(2048, 16 * 4096) * self.w


class Model(Float32Model):
    def __init__(self, *args):
        super().__init__(*args)
        self.to(DTYPE)


def get_inputs():
    return [t.to(DTYPE) if t.is_floating_point() else t for t in [torch.randn(2048, 16 * 4096)]]


def get_init_inputs():
    return []
