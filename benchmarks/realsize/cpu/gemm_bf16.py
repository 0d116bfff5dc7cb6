"""Square bf16 GEMM (cpu-sized; written by benchmarks/realsize/make.py from programs.py)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return A @ B


def get_inputs():
    return [torch.randn(1664, 1664, dtype=torch.bfloat16), torch.randn(1664, 1664, dtype=torch.bfloat16)]


def get_init_inputs():
    return []
