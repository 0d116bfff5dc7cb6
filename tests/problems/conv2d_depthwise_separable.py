"""Depthwise then pointwise conv (separable)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.dw = nn.Conv2d(8, 8, 3, padding=1, groups=8)
        self.pw = nn.Conv2d(8, 16, 1)

    def forward(self, x):
        return self.pw(self.dw(x))


def get_inputs():
    return [torch.randn(2, 8, 12, 12)]


def get_init_inputs():
    return []
