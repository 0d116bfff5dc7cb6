"""InstanceNorm2d and GroupNorm."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.inorm = nn.InstanceNorm2d(8, affine=True)
        self.gnorm = nn.GroupNorm(4, 8)

    def forward(self, x):
        return self.inorm(x), self.gnorm(x)


def get_inputs():
    return [torch.randn(2, 8, 6, 6)]


def get_init_inputs():
    return []
