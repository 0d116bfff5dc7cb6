"""Constant and reflect padding, repeat, flip, expand."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        a = F.pad(x, (1, 2, 0, 3), value=0.5)
        b = F.pad(x.unsqueeze(0), (2, 2), mode="reflect").squeeze(0)
        return a, b, x.repeat(2, 1), x.flip(0, 1), x[:, :1].expand(-1, 6)


def get_inputs():
    return [torch.randn(5, 6)]


def get_init_inputs():
    return []
