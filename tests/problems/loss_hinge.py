"""Hinge loss as KernelBench writes it, and hinge_embedding_loss."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, p, t):
        return torch.mean(torch.clamp(1 - p * t, min=0)), F.hinge_embedding_loss(p, t, margin=0.8)


def get_inputs():
    return [torch.randn(32), torch.randint(0, 2, (32,)).float() * 2 - 1]


def get_init_inputs():
    return []
