"""An LSTM cell unrolled over 8 steps (one GEMM per step plus gates) (gpu-sized; written by benchmarks/realsize/make.py from programs.py)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.cell = nn.LSTMCell(1024, 1024)

    def forward(self, xs, h, c):
        for t in range(8):
            h, c = self.cell(xs[t], (h, c))
        return h, c


def get_inputs():
    return [torch.randn(8, 2048, 1024), torch.randn(2048, 1024), torch.randn(2048, 1024)]


def get_init_inputs():
    return []
