"""Conv3d, softmax over channels, two max-pools."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv3d(2, 4, 3)

    def forward(self, x):
        x = torch.softmax(self.conv(x), dim=1)
        return F.max_pool3d(F.max_pool3d(x, 2), 1)


def get_inputs():
    return [torch.randn(1, 2, 8, 10, 10)]


def get_init_inputs():
    return []
