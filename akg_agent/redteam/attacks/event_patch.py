"""Clock patching on the device: `torch.cuda.Event` replaced by a class whose elapsed time is a tenth
of the truth (on a CPU host the replacement alone is the attack)."""
import torch

REDTEAM = {"cls": "clock and statistics patching", "expect": "tampered", "match": "torch.cuda.Event", "timed": True}

_Event = torch.cuda.Event


class _QuickEvent(_Event):
    def elapsed_time(self, end):
        return super().elapsed_time(end) / 10


torch.cuda.Event = _QuickEvent
