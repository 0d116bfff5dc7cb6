"""A chain of transcendental activations (GELU, SiLU, sigmoid, tanh) (cpu-sized; written by benchmarks/realsize/make.py from programs.py)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.tanh(torch.sigmoid(F.silu(F.gelu(x))) * 3.0)


def get_inputs():
    return [torch.randn(2048, 4096)]


def get_init_inputs():
    return []
