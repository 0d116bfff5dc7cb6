"""Tall-skinny fp32 GEMM (many rows, short K) (gpu-sized; written by benchmarks/realsize/make.py from programs.py)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return A @ B


def get_inputs():
    return [torch.randn(131072, 256), torch.randn(256, 1024)]


def get_init_inputs():
    return []
