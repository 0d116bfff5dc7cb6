"""Genuine: A * 3.5 in C++ built with the system compiler and loaded with ctypes."""
import ctypes
import hashlib
import subprocess
import tempfile
from pathlib import Path

import torch
import torch.nn as nn

SRC = r"""
extern "C" void scale(const float* a, float* out, long n, float s) {
    #pragma omp parallel for simd
    for (long i = 0; i < n; ++i) out[i] = a[i] * s;
}
"""


def _build():
    d = Path(tempfile.gettempdir()) / f"akg_scale_{hashlib.sha1(SRC.encode()).hexdigest()[:12]}"
    d.mkdir(exist_ok=True)
    (d / "k.cpp").write_text(SRC)
    so = d / "k.so"
    if not so.exists():
        subprocess.check_call(["g++", "-O3", "-fopenmp", "-shared", "-fPIC", str(d / "k.cpp"), "-o", str(so)])
    lib = ctypes.CDLL(str(so))
    lib.scale.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_long, ctypes.c_float]
    return lib


_LIB = _build()


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.s = 3.5

    def forward(self, A):
        A = A.contiguous()
        out = torch.empty_like(A)
        _LIB.scale(A.data_ptr(), out.data_ptr(), A.numel(), self.s)
        return out
