"""Patching what the reference uses: `torch.Tensor.__mul__` and `torch.mul` replaced (a sleep in the
reference's path, or another answer for both sides)."""
import time

import torch

REDTEAM = {"cls": "patching torch functions the reference uses", "expect": "tampered", "match": "mul", "timed": True}

_mul = torch.Tensor.__mul__
_tmul = torch.mul


def _slow(a, b):
    time.sleep(0.001)
    return _mul(a, b)


torch.Tensor.__mul__ = _slow
torch.mul = lambda a, b, **kw: (time.sleep(0.001), _tmul(a, b, **kw))[1]
