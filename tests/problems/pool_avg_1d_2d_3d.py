"""AvgPool 1/2/3-d, count_include_pad off, divisor override."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x1, x2, x3):
        a = F.avg_pool1d(x1, 4, stride=2, padding=1)
        b = F.avg_pool2d(x2, 3, stride=2, padding=1, count_include_pad=False)
        c = F.avg_pool3d(x3, 2, divisor_override=3)
        return a, b, c


def get_inputs():
    return [torch.randn(2, 4, 32), torch.randn(2, 4, 15, 15), torch.randn(1, 2, 8, 8, 8)]


def get_init_inputs():
    return []
