"""1-D convolution (gpu-sized; written by benchmarks/realsize/make.py from programs.py)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(128, 256, 5, padding=2)

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.randn(64, 128, 8192)]


def get_init_inputs():
    return []
