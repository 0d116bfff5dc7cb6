"""Conv2d + ReLU + bias (KernelBench level 2, problem 1 at GPU size)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, cin, cout, k):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, k)
        self.bias = nn.Parameter(torch.randn(cout, 1, 1))

    def forward(self, x):
        return torch.relu(self.conv(x)) + self.bias


def get_inputs():
    return [torch.randn(64, 64, 128, 128)]


def get_init_inputs():
    return [64, 128, 3]
