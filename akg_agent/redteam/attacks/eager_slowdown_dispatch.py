"""Patching what the reference uses, at the dispatcher: aten::mul's CPU kernel replaced by one that
sleeps first, so eager (and every baseline) slows while the candidate's own kernels do not."""
import time

import torch

REDTEAM = {"cls": "patching torch functions the reference uses", "expect": "tampered", "match": "dispatcher",
           "timed": True}


def _slow_mul(a, b):
    time.sleep(0.001)
    out = torch.empty(torch.broadcast_shapes(a.shape, getattr(b, "shape", ())), dtype=a.dtype, device=a.device)
    return torch.ops.aten.mul.out(a, b, out=out)


_lib = torch.library.Library("aten", "IMPL")
_lib.impl("mul.Tensor", _slow_mul, "CPU")
