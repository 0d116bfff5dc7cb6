import torch
import triton
import triton.language as tl


@triton.jit
def add_layer_norm_kernel(x_ptr, r_ptr, w_ptr, b_ptr, y_ptr, sum_ptr, N, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    h = tl.load(x_ptr + row * N + cols, mask=mask, other=0.0) + tl.load(r_ptr + row * N + cols, mask=mask, other=0.0)
    tl.store(sum_ptr + row * N + cols, h, mask=mask)
    mean = tl.sum(h, axis=0) / N
    d = tl.where(mask, h - mean, 0.0)
    rstd = tl.rsqrt(tl.sum(d * d, axis=0) / N + eps)
    w = tl.load(w_ptr + cols, mask=mask)
    b = tl.load(b_ptr + cols, mask=mask)
    tl.store(y_ptr + row * N + cols, d * rstd * w + b, mask=mask)


class ModelNew(torch.nn.Module):
    def __init__(self, n):
        super().__init__()
        self.norm = torch.nn.LayerNorm(n)

    def forward(self, x, residual):
        rows = x.numel() // x.shape[-1]
        y = torch.empty_like(x)
        h = torch.empty_like(x)
        add_layer_norm_kernel[(rows,)](x, residual, self.norm.weight, self.norm.bias, y, h, x.shape[-1], 1e-5,
                                       BLOCK=triton.next_power_of_2(x.shape[-1]))
        return y, h


def get_inputs():
    return [torch.randn(4, 16, 80), torch.randn(4, 16, 80)]


def get_init_inputs():
    return [80]
