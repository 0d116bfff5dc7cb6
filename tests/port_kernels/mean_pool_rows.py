import torch
import triton
import triton.language as tl


@triton.jit
def mean_bias_kernel(x_ptr, b_ptr, out_ptr, L: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, L, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + row * L + cols, mask=cols < L, other=0.0)
    tl.store(out_ptr + row, tl.sum(acc, axis=0) / L + tl.load(b_ptr + row))


class ModelNew(torch.nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.bias = torch.nn.Parameter(torch.randn(channels))

    def forward(self, x):
        n, c, h, w = x.shape
        out = torch.empty((n, c), dtype=x.dtype, device=x.device)
        mean_bias_kernel[(n * c,)](x, self.bias.repeat(n), out, h * w, BLOCK=64)
        return out


def get_inputs():
    return [torch.randn(2, 6, 10, 13)]


def get_init_inputs():
    return [6]
