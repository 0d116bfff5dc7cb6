"""Deferred work: forward returns an empty tensor at once and a thread writes the answer into it after
the call has returned (and the timer has stopped)."""
import threading
import time

import torch

REDTEAM = {"cls": "threads and side streams", "expect": "threads", "match": "thread(s) running", "timed": False}

_Honest = globals()["ModelNew"]


class ModelNew(_Honest):
    def forward(self, *args):
        shape_of = super().forward(*args)  # learn the shape once; the work that counts is deferred
        out = torch.empty_like(shape_of)

        def fill():
            time.sleep(0.05)
            out.copy_(super(ModelNew, self).forward(*args))

        threading.Thread(target=fill, daemon=True).start()
        return out
