"""Grouped ConvTranspose2d with asymmetric stride."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.ConvTranspose2d(8, 8, (3, 4), stride=(2, 1), padding=(1, 0), groups=2)

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.randn(2, 8, 7, 9)]


def get_init_inputs():
    return []
