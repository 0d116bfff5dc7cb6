"""Unary activations: relu, leaky_relu, sigmoid, tanh, gelu (erf and tanh)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        a = torch.relu(x) + F.leaky_relu(x, 0.2)
        b = torch.sigmoid(x) * torch.tanh(x)
        return a + b + F.gelu(x) - F.gelu(x, approximate="tanh")


def get_inputs():
    return [torch.randn(16, 64)]


def get_init_inputs():
    return []
