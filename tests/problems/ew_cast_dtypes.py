"""dtype casts: float64 and int32 round trips, bool masks as floats."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        d = x.double() * 1.5
        i = (x * 10).to(torch.int32)
        return d.float() + i.float() + (x > 0).to(torch.float32)


def get_inputs():
    return [torch.randn(32, 8)]


def get_init_inputs():
    return []
