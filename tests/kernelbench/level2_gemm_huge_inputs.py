"""A GEMM-based level-2 shape whose input alone is 64 GiB: more than this machine's memory, so
lifting can only succeed if it never materialises inputs."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features, out_features, scaling_factor):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.scaling_factor = scaling_factor

    def forward(self, x):
        x = self.gemm(x)
        x = torch.sigmoid(x) * self.scaling_factor
        return torch.sum(x, dim=1, keepdim=True)


batch_size = 4194304
in_features = 4096
out_features = 1024
scaling_factor = 2.0


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, scaling_factor]
