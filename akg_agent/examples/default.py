# The embedded default problem (KernelBench level-2 style): a GEMM whose row-sum the algebraic
# passes move in front of the contraction, then a conv with a fused pointwise epilogue.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features, out_features, channels):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.conv = nn.Conv2d(channels, 2 * channels, kernel_size=3, padding=1)
        self.scale = nn.Parameter(torch.randn(2 * channels, 1, 1))

    def forward(self, x, img):
        y = self.linear(x)
        y = torch.sum(y, dim=1, keepdim=True)  # reduction over the GEMM's free axis
        y = torch.logsumexp(y, dim=1, keepdim=True)  # over a size-1 axis: the identity
        z = self.conv(img) * self.scale
        z = torch.relu(z) * 1.0 + 0.0
        z = torch.clamp(torch.clamp(z, min=0.0), max=6.0)
        return y, torch.mean(z, dim=[2, 3])


batch_size = 64
in_features = 256
out_features = 512
channels = 8


def get_inputs():
    return [torch.randn(batch_size, in_features), torch.randn(batch_size, channels, 16, 16)]


def get_init_inputs():
    return [in_features, out_features, channels]
