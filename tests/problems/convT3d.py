"""ConvTranspose3d."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.ConvTranspose3d(4, 2, 3, stride=2, padding=1)

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.randn(1, 4, 4, 5, 5)]


def get_init_inputs():
    return []
