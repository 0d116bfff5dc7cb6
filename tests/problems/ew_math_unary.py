"""exp, log, sqrt, rsqrt, abs, neg, reciprocal, erf, sin, cos, log1p, expm1."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        p = x.abs() + 0.5
        a = torch.exp(-p) + torch.log(p) + torch.sqrt(p) + torch.rsqrt(p) + torch.reciprocal(p)
        return a + torch.erf(x) + torch.sin(x) * torch.cos(x) + torch.log1p(p) - torch.expm1(-p) + (-x)


def get_inputs():
    return [torch.randn(32, 32)]


def get_init_inputs():
    return []
