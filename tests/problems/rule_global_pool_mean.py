"""Mean of a global pool; average pool over the whole window; mean of mean."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 6, 3)

    def forward(self, x):
        x = self.conv(x)
        a = F.adaptive_avg_pool2d(x, 1).mean(dim=[2, 3])
        b = F.avg_pool2d(x, 6).flatten(1)
        c = x.mean(dim=3, keepdim=True).mean(dim=2)
        return a, b, c


def get_inputs():
    return [torch.randn(2, 3, 8, 8)]


def get_init_inputs():
    return []
