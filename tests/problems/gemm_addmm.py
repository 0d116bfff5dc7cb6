"""addmm and baddbmm with alpha and beta."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, bias, A, B, C, D, E):
        return torch.addmm(bias, A, B, beta=0.5, alpha=2.0), torch.baddbmm(C, D, E)


def get_inputs():
    return [torch.randn(32), torch.randn(16, 24), torch.randn(24, 32), torch.randn(2, 8, 8), torch.randn(2, 8, 4), torch.randn(2, 4, 8)]


def get_init_inputs():
    return []
