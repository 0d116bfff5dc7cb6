"""Batched bf16 GEMM (gpu-sized; written by benchmarks/realsize/make.py from programs.py)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return torch.bmm(A, B)


def get_inputs():
    return [torch.randn(48, 2048, 2048, dtype=torch.bfloat16), torch.randn(48, 2048, 2048, dtype=torch.bfloat16)]


def get_init_inputs():
    return []
