"""Multiply by one, add zero, divide by one, pow one, dropout p=0, double transposes and reshapes, a
slice of a transpose and a slice of a concatenation that reads one operand."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.drop = nn.Dropout(0.0)

    def forward(self, x):
        y = self.drop(x) * 1.0 + 0.0
        y = (y / 1.0) ** 1.0 - 0.0
        z = y.t().t().reshape(4, 2, 8).reshape(8, 8)
        w = torch.ones(1, device=x.device) * (torch.zeros(1, device=x.device) + y)
        s = torch.cat([x.t()[2:6], y], dim=0)[1:3]  # rows 3:5 of x.t(): x's columns, not the concat
        return z, -(-y), w, s


def get_inputs():
    return [torch.randn(8, 8)]


def get_init_inputs():
    return []
