"""The C++ backend's fp16 conversion (`dsl_backends/cpp/style.py`, `akg_f16_to_f32`): integer and float arithmetic
GCC vectorises, where its _Float16 conversion ran one element at a time (a fp16 layer norm at 0.045x eager on
the CPU, 0.14x after); every one of the 65536 half values converts as torch converts it, bit for bit."""

from __future__ import annotations

import shutil
import subprocess

import pytest
import torch

from dsl_backends.cpp.style import PRELUDE_CPP

MAIN = r"""
#include <cstdio>
int main(int argc, char** argv) {
    FILE* out = std::fopen(argv[1], "wb");
    for (uint32_t h = 0; h < 65536; h++) { float f = akg_f16_to_f32((uint16_t)h); std::fwrite(&f, 4, 1, out); }
    std::fclose(out);
    return 0;
}
"""


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")
def test_every_half_value_converts_as_torchs(tmp_path):
    src, exe, out = tmp_path / "half.cpp", tmp_path / "half", tmp_path / "half.bin"
    src.write_text("#include <cstdint>\n#include <cstring>\n" + PRELUDE_CPP + MAIN)
    subprocess.run(["g++", "-O3", "-march=native", "-std=c++17", "-fopenmp", str(src), "-o", str(exe)], check=True,
                   capture_output=True, timeout=300)
    subprocess.run([str(exe), str(out)], check=True, timeout=60)
    got = torch.frombuffer(bytearray(out.read_bytes()), dtype=torch.int32)
    want = torch.arange(65536, dtype=torch.int32).to(torch.int16).view(torch.float16).float().view(torch.int32)
    nan = torch.arange(65536, dtype=torch.int32).to(torch.int16).view(torch.float16).isnan()
    assert torch.equal(got[~nan], want[~nan])
    assert got[nan].view(torch.float32).isnan().all()
