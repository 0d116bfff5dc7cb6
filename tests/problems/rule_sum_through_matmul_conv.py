"""Reductions that move through matmul and conv."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3)
        self.w = nn.Parameter(torch.randn(16, 12))

    def forward(self, x, img):
        return torch.matmul(x, self.w).sum(dim=-1), self.conv(img).sum(dim=1, keepdim=True)


def get_inputs():
    return [torch.randn(4, 5, 16), torch.randn(2, 3, 8, 8)]


def get_init_inputs():
    return []
