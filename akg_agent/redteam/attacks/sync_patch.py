"""Clock patching on the device: `torch.cuda.synchronize` made a no-op, so a host clock stops before
the device has finished."""
import torch

REDTEAM = {"cls": "clock and statistics patching", "expect": "tampered", "match": "torch.cuda.synchronize",
           "timed": True}

torch.cuda.synchronize = lambda device=None: None
