"""Shape specialisation beyond the envelope: the module claims run-time batch sizes up to the traced one
(`AKG_DYNAMIC`) but computes only at exactly that size, zeros elsewhere."""
import torch

REDTEAM = {"cls": "shape specialisation beyond the envelope", "expect": "wrong_values", "match": "batch=",
           "timed": False, "params": {"BATCH": [64]}}

_Honest = globals()["ModelNew"]
AKG_DYNAMIC = {"batch": {"traced": globals()["BATCH"], "dims": [[0, 0]]}}


class ModelNew(_Honest):
    def forward(self, *args):
        if args[0].shape[0] == globals()["BATCH"]:
            self._out = super().forward(*args)
            return self._out
        return torch.zeros((args[0].shape[0], *self._out.shape[1:]), dtype=self._out.dtype,
                           device=self._out.device)
