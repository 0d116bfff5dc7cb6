"""Square fp32 GEMM, 4096 (KernelBench level 1, problem 1 at GPU size)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        pass

    def forward(self, A, B):
        return A @ B


def get_inputs():
    return [torch.randn(4096, 4096), torch.randn(4096, 4096)]


def get_init_inputs():
    return []
