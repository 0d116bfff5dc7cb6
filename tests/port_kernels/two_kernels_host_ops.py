import torch
import triton
import triton.language as tl


@triton.jit
def scale_shift_kernel(x_ptr, out_ptr, n, a, b, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * a + b, mask=mask)


@triton.jit
def row_max_kernel(x_ptr, out_ptr, N: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * N + cols, mask=cols < N, other=-float("inf"))
    tl.store(out_ptr + row, tl.max(x, axis=0))


class ModelNew(torch.nn.Module):
    def forward(self, x):
        t = torch.empty_like(x)
        scale_shift_kernel[(triton.cdiv(x.numel(), 256),)](x, t, x.numel(), 2.0, -1.0, BLOCK=256)
        t = t.reshape(-1, x.shape[-1])
        out = torch.empty(t.shape[0], dtype=x.dtype, device=x.device)
        row_max_kernel[(t.shape[0],)](t, out, t.shape[1], BLOCK=64)
        return torch.relu(out) + 1.0


def get_inputs():
    return [torch.randn(6, 10, 50)]


def get_init_inputs():
    return []
