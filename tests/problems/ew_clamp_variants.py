"""clamp with scalar and tensor bounds, clamp_min, clamp_max."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, lo, hi):
        a = torch.clamp(x, -0.5, 0.75) + x.clamp_min(0.1) + x.clamp_max(-0.1)
        return a + torch.clamp(x, min=lo, max=hi)


def get_inputs():
    return [torch.randn(10, 50), torch.full((50,), -0.3), torch.full((50,), 0.4)]


def get_init_inputs():
    return []
