"""Redundant clamps: clamp of clamp, relu then clamp, clamp of sigmoid and tanh, hardtanh."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        a = torch.clamp(torch.clamp(x, min=-2.0, max=3.0), min=-1.0, max=5.0)
        b = torch.clamp(torch.relu(x), min=0.0, max=6.0)
        c = torch.clamp(torch.sigmoid(x), 0.0, 1.0) + torch.clamp(torch.tanh(x), -1.0, 1.0)
        return a, b, c, torch.relu(F.hardtanh(x, -2.0, 2.0))


def get_inputs():
    return [torch.randn(16, 16) * 4]


def get_init_inputs():
    return []
