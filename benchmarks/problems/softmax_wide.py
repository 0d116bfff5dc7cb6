"""Row softmax over 16384 columns (KernelBench level 1, problem 23 shape)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        pass

    def forward(self, x):
        return torch.softmax(x, dim=1)


def get_inputs():
    return [torch.randn(4096, 16384)]


def get_init_inputs():
    return []
