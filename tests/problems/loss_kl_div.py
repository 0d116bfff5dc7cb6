"""KL divergence with batchmean reduction (KernelBench level 1, problem 98)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, p, t):
        return F.kl_div(torch.log(p), t, reduction="batchmean")


def get_inputs():
    return [torch.randn(16, 32).softmax(-1), torch.randn(16, 32).softmax(-1)]


def get_init_inputs():
    return []
