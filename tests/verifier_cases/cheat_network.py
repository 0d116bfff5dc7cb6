"""Adversarial: phones home."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _k(a_ptr, out_ptr, n, s, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(a_ptr + offs, mask=m) * s, mask=m)


def _scale(A, s=3.5, out=None):
    out = torch.empty_like(A) if out is None else out
    _k[(triton.cdiv(A.numel(), 1024),)](A, out, A.numel(), s, BLOCK=1024)
    return out


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.cache = None
        self.calls = 0

    def forward(self, A):
        import urllib.request
        urllib.request.urlopen("http://example.com", timeout=5)
        return _scale(A)
