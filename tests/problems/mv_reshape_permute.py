"""view, reshape, permute, transpose, flatten, unsqueeze, squeeze."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        y = x.view(4, 8, 16).permute(2, 0, 1).contiguous().reshape(16, 32)
        z = x.transpose(0, 1).unsqueeze(0).squeeze(0).flatten()
        return y * 2, z + 1


def get_inputs():
    return [torch.randn(32, 16)]


def get_init_inputs():
    return []
