"""Large host buffers of a written module on 2 MiB pages: a kernel output of at least 32 MiB is allocated
2 MiB-aligned and marked MADV_HUGEPAGE (a fresh 4 KiB-page buffer faults once per page on its first write,
which cost more than the kernels on this host), as a contiguous view of the right shape and dtype; smaller
outputs and other devices keep torch.empty."""

from __future__ import annotations

import importlib.util

import torch

from akg_agent.translate import build, render
from akg_agent.verifier import verify
from dsl_backends.module_helpers import HUGE_PAGE_MIN_BYTES, huge_allocation
from ir.kernel.ir import Buf

PROBLEM = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x) * 2.0 + 1.0


def get_inputs():
    return [torch.randn({rows}, 1024)]


def get_init_inputs():
    return []
'''


def _written(tmp_path, rows):
    problem = tmp_path / f"relu_{rows}.py"
    problem.write_text(PROBLEM.format(rows=rows))
    text = render(build(problem, "cpp", "cpu", tuned=False))
    cand = tmp_path / f"cand_{rows}.py"
    cand.write_text(text)
    return problem, cand, text


def _load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_only_static_outputs_of_32_mib_or_more_take_huge_pages():
    assert huge_allocation(Buf("o", (8192, 1024), "f32")) == HUGE_PAGE_MIN_BYTES
    assert huge_allocation(Buf("o", (8192, 1023), "f32")) == 0
    assert huge_allocation(Buf("o", (16384, 1024), "bf16")) == HUGE_PAGE_MIN_BYTES
    assert huge_allocation(Buf("o", (8192, 1024), "f64")) == 2 * HUGE_PAGE_MIN_BYTES


def test_a_large_output_is_an_aligned_contiguous_view_and_verifies(tmp_path):
    problem, cand, text = _written(tmp_path, 8192)  # 32 MiB output
    assert "_akg_empty((8192, 1024), torch.float32, x.device, 33554432)" in text
    assert verify(problem, cand, target="cpu", seeds=(0, 1)).accepted
    mod = _load(cand, "huge_cand")
    x = torch.randn(8192, 1024)
    out = mod.ModelNew()(x)
    assert out.shape == (8192, 1024) and out.dtype == torch.float32 and out.is_contiguous()
    assert torch.equal(out, torch.relu(x) * 2.0 + 1.0)
    if mod._AKG_MADVISE is not None:  # Linux: the view starts on a 2 MiB boundary
        assert out.data_ptr() % (1 << 21) == 0
    second = mod.ModelNew()(x)
    out.fill_(0.0)  # each call's output is its own buffer
    assert torch.equal(second, torch.relu(x) * 2.0 + 1.0)
    # the marked range lies inside the buffer torch allocated, for any size (a recorder stands in for madvise)
    calls = []
    mod._AKG_MADVISE = lambda addr, length, advice: calls.append((addr, length, advice)) or 0
    for nbytes in (HUGE_PAGE_MIN_BYTES, HUGE_PAGE_MIN_BYTES + 4, 3 * HUGE_PAGE_MIN_BYTES - 12):
        view = mod._akg_empty((nbytes // 4,), torch.float32, torch.device("cpu"), nbytes)
        raw = view.untyped_storage()
        addr, length, advice = calls[-1]
        assert advice == 14 and addr % (1 << 21) == 0 and length % (1 << 21) == 0 and length >= nbytes - (1 << 21)
        assert raw.data_ptr() <= addr and addr + length <= raw.data_ptr() + raw.nbytes()
        assert addr <= view.data_ptr() and view.numel() * 4 == nbytes
    # another device keeps torch.empty (a stand-in device here)
    meta = mod._akg_empty((4, 4), torch.float32, torch.device("meta"), 64)
    assert meta.device.type == "meta" and meta.storage_offset() == 0


def test_a_small_output_keeps_torch_empty(tmp_path):
    _, _, text = _written(tmp_path, 4096)  # 16 MiB: glibc's heap serves it, already touched, in a loop
    # the input's shape and dtype: torch's empty_like of it (no keywords to parse)
    assert "_akg_empty" not in text and "torch.empty_like(x)" in text
