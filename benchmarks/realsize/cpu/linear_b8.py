"""nn.Linear with bias (inference) (cpu, batch 8-sized; written by benchmarks/realsize/make.py from programs.py)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(2048, 2048)

    def forward(self, x):
        return self.fc(x)


def get_inputs():
    return [torch.randn(8, 2048)]


def get_init_inputs():
    return []
