"""A 3-layer MLP at batch 8 (small-batch inference), CPU-sized."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(2048, 4096), nn.ReLU(), nn.Linear(4096, 4096), nn.ReLU(),
                                 nn.Linear(4096, 1024))

    def forward(self, x):
        return self.net(x)


def get_inputs():
    return [torch.randn(8, 2048)]


def get_init_inputs():
    return []
