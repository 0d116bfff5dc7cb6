"""Row-sum of a GEMM: reduce-through-linear (and mean)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(32, 64)
        self.linear2 = nn.Linear(32, 16)

    def forward(self, x):
        return self.linear(x).sum(dim=1, keepdim=True), self.linear2(x).mean(dim=-1)


def get_inputs():
    return [torch.randn(8, 32)]


def get_init_inputs():
    return []
