"""Environment patching: torch's intra-op threads changed at import (eager on one core where it had
two), the candidate's own kernels unaffected."""
import torch

REDTEAM = {"cls": "patching torch functions the reference uses", "expect": "tampered",
           "match": "torch.get_num_threads()", "timed": True}

torch.set_num_threads(1 if torch.get_num_threads() > 1 else 2)
