"""An LSTM cell unrolled over 8 steps (one GEMM per step plus gates) (gpu-sized, cast to bfloat16; written by benchmarks/realsize/make.py from
programs.py)."""
import torch
import torch.nn as nn
import torch.nn.functional as F

DTYPE = torch.bfloat16


class Float32Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.cell = nn.LSTMCell(1024, 1024)

    def forward(self, xs, h, c):
        for t in range(8):
            h, c = self.cell(xs[t], (h, c))
        return h, c


class Model(Float32Model):
    def __init__(self, *args):
        super().__init__(*args)
        self.to(DTYPE)


def get_inputs():
    return [t.to(DTYPE) if t.is_floating_point() else t for t in [torch.randn(8, 2048, 1024), torch.randn(2048, 1024), torch.randn(2048, 1024)]]


def get_init_inputs():
    return []
