"""Adversarial: defines no ModelNew."""
import torch


class Model(torch.nn.Module):
    pass
