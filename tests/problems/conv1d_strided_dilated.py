"""Conv1d with stride, padding and dilation."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(4, 8, kernel_size=5, stride=2, padding=3, dilation=2)

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.randn(2, 4, 64)]


def get_init_inputs():
    return []
