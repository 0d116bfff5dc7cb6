"""Adversarial: ModelNew's parameters do not line up with Model's."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(3))

    def forward(self, A):
        return A
