"""Batched fp32 GEMM (bmm) (cpu-sized; written by benchmarks/realsize/make.py from programs.py)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return torch.bmm(A, B)


def get_inputs():
    return [torch.randn(24, 256, 512), torch.randn(24, 512, 256)]


def get_init_inputs():
    return []
