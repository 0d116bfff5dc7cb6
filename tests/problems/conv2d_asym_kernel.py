"""Conv2d with an asymmetric kernel and asymmetric stride."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, kernel_size=(3, 5), stride=(1, 2), padding=(1, 2), bias=False)

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.randn(2, 3, 16, 20)]


def get_init_inputs():
    return []
