"""KernelBench's scalar forms: a matrix times a Python float, clamp bounds and a reduction dimension
passed to forward as Python numbers."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, s, lo, hi, dim):
        return torch.clamp(A * s, min=lo, max=hi).sum(dim=dim)


def get_inputs():
    return [torch.randn(32, 48), 2.5, -1.0, 1.5, 1]


def get_init_inputs():
    return []
