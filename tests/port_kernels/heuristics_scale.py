import torch
import triton
import triton.language as tl


@triton.heuristics({"BLOCK": lambda args: triton.next_power_of_2(args["N"])})
@triton.jit
def row_scale_kernel(x_ptr, s_ptr, out_ptr, N, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    s = tl.load(s_ptr + row)
    x = tl.load(x_ptr + row * N + cols, mask=mask)
    tl.store(out_ptr + row * N + cols, x * s - tl.sum(tl.where(mask, x, 0.0), axis=0) / N, mask=mask)


class ModelNew(torch.nn.Module):
    def forward(self, x, s):
        out = torch.empty_like(x)
        row_scale_kernel[(x.shape[0],)](x, s, out, x.shape[1])
        return out


def get_inputs():
    return [torch.randn(20, 75), torch.randn(20)]


def get_init_inputs():
    return []
