"""Linear, min with a constant tensor, subtract a constant."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(16, 24)
        self.c = nn.Parameter(torch.tensor(0.5))

    def forward(self, x):
        x = self.linear(x)
        return torch.min(x, self.c) - self.c


def get_inputs():
    return [torch.randn(8, 16)]


def get_init_inputs():
    return []
