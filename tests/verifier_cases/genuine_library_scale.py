"""Genuine: the problem's one op as a declared library call. The red team's honest module for
mm_scalar_mul: each attack in akg_agent/redteam/attacks is appended to it."""
import torch.nn as nn

AKG_LIBRARY_CALLS = ["aten.mul"]


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.s = 3.5

    def forward(self, A):
        return A * self.s
