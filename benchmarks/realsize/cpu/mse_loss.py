"""Mean squared error of two tensors: a reduction to one value (cpu-sized; written by benchmarks/realsize/make.py from programs.py)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return F.mse_loss(a, b)


def get_inputs():
    return [torch.randn(4096, 8192), torch.randn(4096, 8192)]


def get_init_inputs():
    return []
