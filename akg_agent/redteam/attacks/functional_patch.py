"""Patching what the reference uses: torch.nn.functional's linear, gelu, softmax and layer_norm
replaced, so a reference built on them computes (or times) what the attacker chooses."""
import torch.nn.functional as F

REDTEAM = {"cls": "patching torch functions the reference uses", "expect": "tampered", "match": "torch.nn.functional",
           "timed": True}

_linear = F.linear
F.linear = lambda x, w, b=None: _linear(x, w, b) * 0
F.gelu = lambda x, approximate="none": x
F.softmax = lambda x, dim=None, **kw: x
F.layer_norm = lambda x, *a, **kw: x
