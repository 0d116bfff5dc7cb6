"""Clock patching on the device (GPU): `torch.cuda.Event.elapsed_time` replaced on the class itself, so
events made by the harness from the very class it bound report a fifth of the truth."""
import torch

REDTEAM = {"cls": "clock and statistics patching", "expect": "tampered", "match": "torch.cuda.Event.elapsed_time",
           "timed": True, "gpu": True}

_elapsed = torch.cuda.Event.elapsed_time
torch.cuda.Event.elapsed_time = lambda self, end: _elapsed(self, end) / 5
