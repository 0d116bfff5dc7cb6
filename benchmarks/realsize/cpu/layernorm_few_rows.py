"""Layer norm over each sample's (C, H, W): few rows, each millions long (cpu-sized; written by benchmarks/realsize/make.py from programs.py)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln = nn.LayerNorm([64, 512, 512])

    def forward(self, x):
        return self.ln(x)


def get_inputs():
    return [torch.randn(1, 64, 512, 512)]


def get_init_inputs():
    return []
