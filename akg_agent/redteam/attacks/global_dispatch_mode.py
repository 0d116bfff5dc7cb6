"""Harness interference: a dispatch mode entered at import and never left. Every later op of the
process (the reference's, the guard's view of the candidate's) runs through it."""
import torch
from torch.utils._python_dispatch import TorchDispatchMode

REDTEAM = {"cls": "patching torch functions the reference uses", "expect": "tampered", "match": "dispatch modes",
           "timed": False}


class _Quiet(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


_mode = _Quiet()
_mode.__enter__()
assert torch._C._len_torch_dispatch_stack() >= 1
