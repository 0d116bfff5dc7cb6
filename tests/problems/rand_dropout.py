"""Dropout after a GEMM (KernelBench level 2, problem 66 pattern); eval mode turns it off."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(32, 16)
        self.dropout = nn.Dropout(0.3)

    def forward(self, x):
        x = self.dropout(self.linear(x))
        return torch.softmax(x, dim=1)


def get_inputs():
    return [torch.randn(8, 32)]


def get_init_inputs():
    return []
