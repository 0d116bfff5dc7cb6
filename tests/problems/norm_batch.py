"""BatchNorm 1/2/3-d with running statistics (eval)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.b1 = nn.BatchNorm1d(8)
        self.b2 = nn.BatchNorm2d(4)
        self.b3 = nn.BatchNorm3d(2, affine=False)
        with torch.no_grad():
            for b in (self.b1, self.b2, self.b3):
                b.running_mean.uniform_(-1, 1)
                b.running_var.uniform_(0.5, 2)

    def forward(self, x1, x2, x3):
        return self.b1(x1), self.b2(x2), self.b3(x3)


def get_inputs():
    return [torch.randn(6, 8), torch.randn(2, 4, 5, 5), torch.randn(2, 2, 3, 4, 4)]


def get_init_inputs():
    return []
