"""selu, elu, celu, hardsigmoid, hardswish, hardtanh, relu6, softplus."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        a = F.selu(x) + F.elu(x, alpha=0.5) + F.celu(x, alpha=2.0)
        b = F.hardsigmoid(x) + F.hardswish(x) + F.hardtanh(x, -0.5, 0.5) + F.relu6(x * 4)
        return a * b + F.softplus(x, beta=2.0, threshold=5.0)


def get_inputs():
    return [torch.randn(16, 64) * 3]


def get_init_inputs():
    return []
