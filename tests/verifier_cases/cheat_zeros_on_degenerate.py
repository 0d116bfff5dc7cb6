"""Adversarial: all zeros for a wide softmax (KernelBench issue 165: passes atol=1e-4)."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.zeros_like(x)
