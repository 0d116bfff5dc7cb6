import torch
import triton
import triton.language as tl


@triton.jit
def row_sum_kernel(x_ptr, out_ptr, N: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + row * N + cols, mask=cols < N, other=0.0)
    tl.store(out_ptr + row, tl.sum(acc, axis=0))


class ModelNew(torch.nn.Module):
    def forward(self, x):
        rows, n = x.shape
        out = torch.empty(rows, dtype=x.dtype, device=x.device)
        row_sum_kernel[(rows,)](x, out, n, BLOCK=128)
        return out


def get_inputs():
    return [torch.randn(24, 1000)]


def get_init_inputs():
    return []
