"""Rectangular matmul with transposed operands (A.T @ B.T)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return torch.matmul(A.T, B.T)


def get_inputs():
    return [torch.randn(48, 32), torch.randn(64, 48)]


def get_init_inputs():
    return []
