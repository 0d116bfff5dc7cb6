"""A rectangular bf16 GEMM, (4096 x 2048) @ (2048 x 8192): held out to validate the cost model's ranking."""
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
    return [torch.randn(4096, 2048, dtype=torch.bfloat16), torch.randn(2048, 8192, dtype=torch.bfloat16)]


def get_init_inputs():
    return []
