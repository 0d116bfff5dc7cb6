"""Adaptive average and max pooling to non-trivial sizes."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return F.adaptive_avg_pool2d(x, (3, 5)), F.adaptive_max_pool2d(x, 4), F.adaptive_avg_pool1d(x.flatten(2), 7)


def get_inputs():
    return [torch.randn(2, 4, 13, 17)]


def get_init_inputs():
    return []
