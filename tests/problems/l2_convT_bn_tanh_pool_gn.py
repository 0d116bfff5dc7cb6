"""ConvTranspose, BatchNorm, tanh, MaxPool, GroupNorm."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.convt = nn.ConvTranspose2d(4, 8, 3, stride=2, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.gn = nn.GroupNorm(2, 8)

    def forward(self, x):
        x = torch.tanh(self.bn(self.convt(x)))
        return self.gn(F.max_pool2d(x, 2))


def get_inputs():
    return [torch.randn(2, 4, 8, 8)]


def get_init_inputs():
    return []
