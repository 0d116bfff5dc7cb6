"""Genuine with a declared library call: torch's convolution, then ReLU + bias in Triton."""
import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl

AKG_LIBRARY_CALLS = ["aten.convolution", "aten.conv2d", "aten._convolution", "aten.mkldnn_convolution",
                     "aten.convolution_overrideable", "aten._nnpack_spatial_convolution", "aten.thnn_conv2d",
                     "aten._slow_conv2d_forward", "aten.slow_conv2d_forward", "aten.cudnn_convolution",
                     "aten.add"]


@triton.jit
def _relu_bias(x_ptr, b_ptr, out_ptr, n, hw, c, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    ch = (offs // hw) % c
    x = tl.load(x_ptr + offs, mask=m)
    tl.store(out_ptr + offs, tl.maximum(x, 0.0) + tl.load(b_ptr + ch, mask=m), mask=m)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 16, 3)
        self.bias = nn.Parameter(torch.randn(16, 1, 1))

    def forward(self, x):
        y = F.conv2d(x, self.conv.weight, self.conv.bias).contiguous()
        out = torch.empty_like(y)
        n, c, hw = y.numel(), y.shape[1], y.shape[2] * y.shape[3]
        _relu_bias[(triton.cdiv(n, 1024),)](y, self.bias, out, n, hw, c, BLOCK=1024)
        return out
