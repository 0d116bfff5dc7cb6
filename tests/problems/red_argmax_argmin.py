"""argmax and argmin, with and without keepdim."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.argmax(x, dim=1), torch.argmin(x, dim=2, keepdim=True), torch.argmax(x)


def get_inputs():
    return [torch.randn(4, 16, 32)]


def get_init_inputs():
    return []
