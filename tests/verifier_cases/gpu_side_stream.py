"""Adversarial (GPU): correct, but the real work runs on a side stream that CUDA events on the
current stream never see."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _scale_slowly(a_ptr, out_ptr, n, s, ITERS: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    a = tl.load(a_ptr + offs, mask=m)
    acc = a * 0.0
    for _ in range(ITERS):  # burn time; contributes exactly zero
        acc = acc * 0.5
    tl.store(out_ptr + offs, a * s + acc, mask=m)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.stream = None

    def forward(self, A):
        if self.stream is None:
            self.stream = torch.cuda.Stream()
        out = torch.empty_like(A)
        self.stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.stream):
            _scale_slowly[(triton.cdiv(A.numel(), 256),)](A, out, A.numel(), 3.5, ITERS=200000, BLOCK=256)
        return out
