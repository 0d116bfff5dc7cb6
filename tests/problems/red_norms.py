"""Frobenius, L1 and L2 norms (KernelBench level-1 norm problems)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        fro = torch.norm(x, p="fro")
        l1 = x / torch.mean(torch.abs(x), dim=1, keepdim=True)
        l2 = x / torch.norm(x, p=2, dim=1, keepdim=True)
        return x / fro, l1, l2, torch.linalg.vector_norm(x, ord=3, dim=1)


def get_inputs():
    return [torch.randn(16, 64)]


def get_init_inputs():
    return []
