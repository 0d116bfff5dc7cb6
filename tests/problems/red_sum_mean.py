"""sum and mean over several axes, keepdim both ways."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x.sum(dim=1), x.mean(dim=(0, 2), keepdim=True), x.sum(), torch.mean(x)


def get_inputs():
    return [torch.randn(4, 16, 32)]


def get_init_inputs():
    return []
