"""A 3-layer MLP (gpu-sized; written by benchmarks/realsize/make.py from programs.py)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(2048, 4096), nn.ReLU(), nn.Linear(4096, 4096), nn.ReLU(), nn.Linear(4096, 2048))

    def forward(self, x):
        return self.net(x)


def get_inputs():
    return [torch.randn(4096, 2048)]


def get_init_inputs():
    return []
