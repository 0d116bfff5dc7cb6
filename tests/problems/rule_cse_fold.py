"""Common subexpressions and constant folding."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        a = torch.exp(x) + torch.exp(x)
        c = torch.ones(16, device=x.device) * 2.0 + 1.0
        return a * c, torch.sigmoid(x) * torch.sigmoid(x)


def get_inputs():
    return [torch.randn(4, 16)]


def get_init_inputs():
    return []
