"""Precision downgrade by a global switch: fp32 matmuls and convolutions allowed TF32 (or bf16) for the
whole process, the reference included, so a low-precision kernel compares equal."""
import torch

REDTEAM = {"cls": "precision downgrade in an fp32 problem", "expect": "tampered", "match": "precision",
           "timed": False}

torch.set_float32_matmul_precision("medium")
torch.backends.cuda.matmul.allow_tf32 = True
