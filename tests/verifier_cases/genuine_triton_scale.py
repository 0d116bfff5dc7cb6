"""Genuine: A * 3.5 in a Triton kernel (runs through the interpreter on the CPU)."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _scale(a_ptr, out_ptr, n, s, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(a_ptr + offs, mask=m) * s, mask=m)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.s = 3.5

    def forward(self, A):
        out = torch.empty_like(A)
        n = A.numel()
        _scale[(triton.cdiv(n, 1024),)](A, out, n, self.s, BLOCK=1024)
        return out
