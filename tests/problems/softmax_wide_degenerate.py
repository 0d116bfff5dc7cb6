"""A wide softmax of non-negative inputs: every output is near 6e-5, so all zeros pass atol=1e-4
(a degenerate reference, KernelBench issue 165)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.softmax(x, dim=1)


def get_inputs():
    return [torch.rand(4, 16384)]


def get_init_inputs():
    return []
