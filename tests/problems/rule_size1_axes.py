"""softmax, log_softmax, logsumexp, mean and max over size-1 axes."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(16, 32)

    def forward(self, x):
        y = self.linear(x).sum(dim=1, keepdim=True)
        a = torch.softmax(y, dim=1) + F.log_softmax(y, dim=1)
        b = torch.logsumexp(y, dim=1, keepdim=True) + torch.mean(y, dim=1, keepdim=True) + torch.amax(y, dim=1, keepdim=True)
        return a, b, torch.logsumexp(y, dim=1)


def get_inputs():
    return [torch.randn(8, 16)]


def get_init_inputs():
    return []
