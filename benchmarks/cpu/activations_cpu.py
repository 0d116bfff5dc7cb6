"""Transcendental activations on a 2048 x 4096 fp32 tensor (CPU-sized: tens of ms eager on 2 cores)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.sigmoid(x) * torch.tanh(x) + F.gelu(x) - F.silu(x) * 0.5


def get_inputs():
    return [torch.randn(2048, 4096)]


def get_init_inputs():
    return []
