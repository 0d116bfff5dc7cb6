"""Linear, sigmoid, scale, sum over features (gpu-sized; written by benchmarks/realsize/make.py from programs.py)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4096, 4096)

    def forward(self, x):
        return (torch.sigmoid(self.fc(x)) * 2.0).sum(-1, keepdim=True)


def get_inputs():
    return [torch.randn(8192, 4096)]


def get_init_inputs():
    return []
