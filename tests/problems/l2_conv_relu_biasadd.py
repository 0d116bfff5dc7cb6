"""Conv2d, ReLU, bias add (KernelBench level 2, problem 1)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 16, 3)
        self.bias = nn.Parameter(torch.randn(16, 1, 1))

    def forward(self, x):
        return torch.relu(self.conv(x)) + self.bias


def get_inputs():
    return [torch.randn(2, 3, 16, 16)]


def get_init_inputs():
    return []
