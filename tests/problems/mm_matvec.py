"""Matrix-vector product (N x K) @ (K x 1)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return torch.matmul(A, B)


def get_inputs():
    return [torch.randn(128, 96), torch.randn(96, 1)]


def get_init_inputs():
    return []
