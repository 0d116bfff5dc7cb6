"""Argmax over the last dimension (cpu-sized; written by benchmarks/realsize/make.py from programs.py)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x.argmax(-1)


def get_inputs():
    return [torch.randn(16384, 2048)]


def get_init_inputs():
    return []
