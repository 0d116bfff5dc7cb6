"""MaxPool 1/2/3-d with stride, padding, dilation and ceil_mode."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x1, x2, x3):
        a = F.max_pool1d(x1, 3, stride=2, padding=1, dilation=2)
        b = F.max_pool2d(x2, 3, stride=2, padding=1, ceil_mode=True)
        c = F.max_pool3d(x3, 2)
        return a, b, c


def get_inputs():
    return [torch.randn(2, 4, 32), torch.randn(2, 4, 15, 15), torch.randn(1, 2, 8, 8, 8)]


def get_init_inputs():
    return []
