"""max and min over a dim (values and indices), global max, amax/amin."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        v, i = torch.max(x, dim=2)
        w, j = torch.min(x, dim=1, keepdim=True)
        return v, i, w, j, x.max(), torch.amax(x, dim=(1, 2)), torch.amin(x, dim=0)


def get_inputs():
    return [torch.randn(4, 16, 32)]


def get_init_inputs():
    return []
