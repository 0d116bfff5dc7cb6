import torch
import triton
import triton.language as tl


@triton.jit
def rms_norm_kernel(x_ptr, w_ptr, y_ptr, N, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(x_ptr + row * N + cols, mask=mask, other=0.0)
    rms = tl.sqrt(tl.sum(x * x, axis=0) / N + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0)
    tl.store(y_ptr + row * N + cols, x / rms * w, mask=mask)


class ModelNew(torch.nn.Module):
    def __init__(self, n):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.rand(n) + 0.5)

    def forward(self, x):
        shape = x.shape
        x2 = x.reshape(-1, shape[-1])
        y = torch.empty_like(x2)
        rms_norm_kernel[(x2.shape[0],)](x2, self.weight, y, shape[-1], 1e-6, BLOCK=triton.next_power_of_2(shape[-1]))
        return y.view(shape)


def get_inputs():
    return [torch.randn(4, 12, 96)]


def get_init_inputs():
    return [96]
