"""Softmax over each head's slice of a row, scaled per column, returned in the input's shape (cpu-sized; written by benchmarks/realsize/make.py from programs.py)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.rand(8 * 4096) + 0.5)

    def forward(self, x):
        return (torch.softmax(x.reshape(512, 8, 4096), -1) * 2.0).reshape(512, 8 * 4096) * self.w


def get_inputs():
    return [torch.randn(512, 8 * 4096)]


def get_init_inputs():
    return []
