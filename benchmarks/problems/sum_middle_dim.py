"""Sum over a middle dimension (KernelBench level 1, problem 47 style)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        pass

    def forward(self, x):
        return torch.sum(x, dim=1, keepdim=True)


def get_inputs():
    return [torch.randn(128, 4096, 256)]


def get_init_inputs():
    return []
