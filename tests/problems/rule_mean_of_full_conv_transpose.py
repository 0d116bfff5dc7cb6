"""A global mean (and sum) of transposed convolutions of stride 1 without padding: a GEMV of spatial sums."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.up = nn.ConvTranspose2d(4, 6, 3)
        self.up1 = nn.ConvTranspose1d(3, 5, 4, dilation=2, bias=False)
        self.padded = nn.ConvTranspose2d(4, 6, 3, padding=1)  # cropped edges: the rule must not fire

    def forward(self, x, s):
        return (self.up(x).mean(dim=(2, 3), keepdim=True), self.up1(s).sum(dim=2),
                self.padded(x).mean(dim=(2, 3)))


def get_inputs():
    return [torch.randn(2, 4, 9, 7), torch.randn(3, 3, 11)]


def get_init_inputs():
    return []
