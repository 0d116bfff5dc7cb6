"""diag(A) @ B (KernelBench level 1, problem 12)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return torch.diag(A) @ B


def get_inputs():
    return [torch.randn(64), torch.randn(64, 32)]


def get_init_inputs():
    return []
