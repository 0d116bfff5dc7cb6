"""A 3-layer MLP (cpu-sized; written by benchmarks/realsize/make.py from programs.py)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(1024, 2048), nn.ReLU(), nn.Linear(2048, 2048), nn.ReLU(), nn.Linear(2048, 1024))

    def forward(self, x):
        return self.net(x)


def get_inputs():
    return [torch.randn(128, 1024)]


def get_init_inputs():
    return []
