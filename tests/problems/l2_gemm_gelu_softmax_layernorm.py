"""Gemm, GELU, softmax, LayerNorm, hardtanh."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(24, 32)
        self.ln = nn.LayerNorm(32)

    def forward(self, x):
        x = torch.softmax(F.gelu(self.linear(x)), dim=1)
        return F.hardtanh(self.ln(x), -0.5, 0.5)


def get_inputs():
    return [torch.randn(8, 24)]


def get_init_inputs():
    return []
