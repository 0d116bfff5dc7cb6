"""Adversarial: a library that prints why and aborts (as XLA or a CUDA runtime does); the verdict names it."""
import os
import sys

import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, A):
        sys.stderr.write("F1130 fatal: the runtime was started before fork\n")
        sys.stderr.flush()
        os.abort()
