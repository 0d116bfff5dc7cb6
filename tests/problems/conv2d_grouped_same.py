"""Grouped conv with padding='same' (even kernel: asymmetric pad)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(8, 12, 4, padding="same", groups=4)

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.randn(2, 8, 11, 11)]


def get_init_inputs():
    return []
