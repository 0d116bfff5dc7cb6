"""Chains of scalar arithmetic (KernelBench level-2 scale/divide chains)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(16, 16)

    def forward(self, x):
        x = self.linear(x)
        x = x * 2.0
        x = x * 0.5
        x = x / 4.0
        x = x + 1.0
        x = x - 3.0
        return (x / 2.0) / 5.0, 2.0 * (3.0 * x)


def get_inputs():
    return [torch.randn(8, 16)]


def get_init_inputs():
    return []
