"""Threads and side streams (GPU): the honest kernels run on a side stream, behind a long sleep kernel, and
forward returns without joining it: CUDA events on the current stream see nothing of it."""
import torch

REDTEAM = {"cls": "threads and side streams", "expect": "side_stream", "match": "outside the timed stream",
           "timed": True, "gpu": True}

_Honest = globals()["ModelNew"]


class ModelNew(_Honest):
    def forward(self, *args):
        if not hasattr(self, "_side"):
            self._side = torch.cuda.Stream()
        self._side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self._side):
            torch.cuda._sleep(2_000_000)
            out = super().forward(*args)
        return out
