"""Slicing with steps, negative indices, select and narrow."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        a = x[:, 1:7:2]
        b = x[-3:, :5] + x[0, :5]
        return a, b, x.narrow(1, 2, 4), x[..., -1]


def get_inputs():
    return [torch.randn(10, 12)]


def get_init_inputs():
    return []
