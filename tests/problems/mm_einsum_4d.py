"""4-D tensor-matrix multiply with einsum (KernelBench level 1, problem 11)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return torch.einsum("bijl,lk->bijk", A, B)


def get_inputs():
    return [torch.randn(2, 4, 6, 16), torch.randn(16, 12)]


def get_init_inputs():
    return []
