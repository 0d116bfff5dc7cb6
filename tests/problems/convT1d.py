"""ConvTranspose1d with stride, padding, output_padding, dilation."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.ConvTranspose1d(4, 6, 3, stride=2, padding=1, output_padding=1, dilation=2)

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.randn(2, 4, 20)]


def get_init_inputs():
    return []
