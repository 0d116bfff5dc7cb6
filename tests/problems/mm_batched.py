"""Batched matmul via torch.bmm."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return torch.bmm(A, B)


def get_inputs():
    return [torch.randn(4, 32, 48), torch.randn(4, 48, 16)]


def get_init_inputs():
    return []
