"""Random tensors made inside forward (KernelBench level 3's LSTMs draw their initial state with
torch.randn): noise added to a GEMM, and a uniform mask; the verifier seeds both sides alike."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(32, 16)

    def forward(self, x):
        h0 = torch.randn(x.shape[0], 16, device=x.device)
        keep = torch.rand_like(h0) > 0.25
        return torch.where(keep, torch.tanh(self.linear(x) + h0), torch.zeros_like(h0))


def get_inputs():
    return [torch.randn(8, 32)]


def get_init_inputs():
    return []
