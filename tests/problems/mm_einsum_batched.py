"""Batched einsum with a summed-out axis."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return torch.einsum("bik,bkj->bij", A, B) + torch.einsum("bij->bj", A).sum()


def get_inputs():
    return [torch.randn(3, 8, 16), torch.randn(3, 16, 8)]


def get_init_inputs():
    return []
