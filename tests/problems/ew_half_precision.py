"""fp16 and bf16 inputs through elementwise math (upcast inside)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        return (x.float() * torch.sigmoid(y.float())).to(torch.bfloat16).float() + x.float()


def get_inputs():
    return [torch.randn(16, 32).half(), torch.randn(16, 32).bfloat16()]


def get_init_inputs():
    return []
