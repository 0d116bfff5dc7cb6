"""KernelBench's other movement and alias forms: torch.multiply / subtract / true_divide, torch.roll
along dims and over the flattened tensor, and Tensor.unfold (patch extraction)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        a = torch.multiply(x, y)
        b = torch.roll(a, shifts=(2, -3), dims=(0, 1)) + torch.roll(a, 5)
        w = x.unfold(1, 4, 3)  # 11 windows of 4 along the last axis, every 3
        return torch.subtract(b, torch.true_divide(a, y.abs() + 1.0), alpha=0.5), w.sum(-1) * 2.0 + w[..., 0]


def get_inputs():
    return [torch.randn(16, 36), torch.randn(16, 36)]


def get_init_inputs():
    return []
