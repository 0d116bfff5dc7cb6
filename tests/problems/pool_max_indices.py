"""Max pooling with the positions of the maxima (what a training graph saves for the backward pass): 1-d
dilated, 2-d with padding and ceil_mode over a ReLU (ties: windows of zeros), 3-d."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x1, x2, x3):
        a, ia = F.max_pool1d(x1, 3, stride=2, padding=1, dilation=2, return_indices=True)
        b, ib = F.max_pool2d(torch.relu(x2), 3, stride=2, padding=1, ceil_mode=True, return_indices=True)
        c, ic = F.max_pool3d(x3, 2, return_indices=True)
        return a, ia, b, ib, c, ic


def get_inputs():
    return [torch.randn(2, 4, 32), torch.randn(2, 4, 15, 16), torch.randn(1, 2, 8, 8, 8)]


def get_init_inputs():
    return []
