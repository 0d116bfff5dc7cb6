"""The CPU GEMM's register-tile model and the tuner's order over the C++ GEMM space: spilling tiles
pruned, the tiles the model rates best first (each with the default's cache blocks before variants of
them), thin tiles after; a batched GEMM's space keeps only row tiles that stay inside a batch."""

from __future__ import annotations

from dataclasses import replace

import pytest

from akg_agent.ranking import ranked_space
from akg_agent.translate import Translation, build
from dsl_backends import get_backend
from hardware_models import spec
from hardware_models.cost import register_tile_rate
from ir.kernel.ir import Kernel

AVX2 = {"simd_width": 8, "vector_registers": 16}
AVX512 = {"simd_width": 16, "vector_registers": 32}

BMM_20_ROWS = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, a, b):
        return torch.bmm(a, b)


def get_inputs():
    return [torch.randn(3, 20, 64), torch.randn(3, 64, 48)]


def get_init_inputs():
    return []
'''

LINEAR = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(256, 384)

    def forward(self, x):
        return torch.relu(self.fc(x))


def get_inputs():
    return [torch.randn(96, 256)]


def get_init_inputs():
    return []
'''


def host(monkeypatch, figures: dict[str, int]) -> spec.HardwareModel:
    real = spec.detect_cpu

    def fixed() -> spec.HardwareModel:
        m = real()
        chip = {**m.figures["chip"], **{k: replace(m.figures["chip"][k], value=v) for k, v in figures.items()}}
        return replace(m, figures={**m.figures, "chip": chip})

    monkeypatch.setattr(spec, "detect_cpu", fixed)
    return fixed()


def gemm_kernel(src: str, figures: dict[str, int], monkeypatch,
                tmp_path) -> tuple[spec.HardwareModel, Translation, Kernel]:
    """The pure C++ translation of `src` on a host with these figures, and its GEMM kernel."""
    monkeypatch.setenv("AKG_CACHE_DIR", str(tmp_path / "cache"))
    target = host(monkeypatch, figures)
    path = tmp_path / "p.py"
    path.write_text(src)
    t = build(path, "cpp", "cpu", pure=True)
    [k] = [k for k in t.program.kernels() if k.kind == "matmul"]
    return target, t, k


def test_register_tile_rate_counts_ports_latency_and_spills(monkeypatch):
    avx2 = host(monkeypatch, AVX2)
    assert register_tile_rate(avx2, 6, 16) == 1.0  # 12 FMAs over 2 pipes, 8 loads over 2 ports: FMA-bound
    assert register_tile_rate(avx2, 2, 8) == 0.25  # 2 FMAs wait on one FMA latency
    assert register_tile_rate(avx2, 6, 8) == 0.75
    assert register_tile_rate(avx2, 4, 32) == 0.0  # 16 accumulators + 4 B vectors: more than 16 registers
    avx512 = host(monkeypatch, AVX512)
    assert register_tile_rate(avx512, 4, 32) == 1.0 and register_tile_rate(avx512, 8, 32) == 1.0
    assert register_tile_rate(avx512, 2, 8) == 0.125  # half a vector a row
    assert register_tile_rate(avx512, 8, 64) == 0.0


@pytest.mark.parametrize("figures", [AVX2, AVX512], ids=["avx2", "avx512"])
def test_the_tuners_order_puts_the_best_register_tiles_first(figures, monkeypatch, tmp_path):
    target, t, k = gemm_kernel(LINEAR, figures, monkeypatch, tmp_path)
    backend = get_backend("cpp")
    space, ranked = backend.tuning_space(k, target), ranked_space(backend, k, None, target)
    rates = [register_tile_rate(target, s["MR"], s["NR"]) for s in ranked]
    assert 0 not in rates and all(s in space for s in ranked)
    assert len(ranked) == sum(register_tile_rate(target, s["MR"], s["NR"]) > 0 for s in space)
    best = max(rates)
    top = [s for s in ranked if register_tile_rate(target, s["MR"], s["NR"]) >= 0.9 * best]
    assert ranked[:len(top)] == top and rates[len(top):] == sorted(rates[len(top):], reverse=True)
    tiles = {(s["MR"], s["NR"]) for s in top}
    default = backend.default_schedule(k, target)
    blocks = {key: default.get(key) for key in ("NB", "KC", "COLS_OUTER", "threads")}
    lanes = figures["simd_width"]

    def key(s) -> tuple[float, float]:  # rate, then FMAs per load
        vecs = -(-s["NR"] // lanes)
        return (-register_tile_rate(target, s["MR"], s["NR"]), -s["MR"] * vecs / (s["MR"] + vecs))

    # each near-best tile once, best first, with the default's cache blocks, before any of them changes
    first = ranked[:len(tiles)]
    assert {(s["MR"], s["NR"]) for s in first} == tiles and [key(s) for s in first] == sorted(map(key, first))
    assert all({k: s.get(k) for k in blocks} == blocks for s in first)
    assert (2, 8) not in tiles  # the backend's own order measured this first


def test_a_batched_gemms_space_keeps_row_tiles_inside_a_batch(monkeypatch, tmp_path):
    target, t, k = gemm_kernel(BMM_20_ROWS, AVX2, monkeypatch, tmp_path)
    assert t.schedules[k.name]["MR"] == 5  # 6 does not divide a batch's 20 rows; 5 does
    mrs = {s["MR"] for s in get_backend("cpp").tuning_space(k, target)}
    assert mrs == {2, 4}


@pytest.mark.parametrize("l2, outer", [(2 << 20, 1), (512 << 10, 0)], ids=["l2-2MiB", "l2-512KiB"])
def test_column_blocks_go_outside_where_a_panel_of_b_stays_in_l2(l2, outer, monkeypatch, tmp_path):
    # 1024 rows x K 1024: a panel of B (K x NB of 256) is 1 MiB; rows outside would stream all of B
    # (4 MiB) once per 8 rows. Measured on a 2 MiB-L2 AVX-512 host: 21.4 ms rows outside, 10.3 columns.
    src = LINEAR.replace("nn.Linear(256, 384)", "nn.Linear(1024, 1024)").replace("(96, 256)", "(1024, 1024)")
    target, t, k = gemm_kernel(src, dict(AVX512, local_mem_per_group_bytes=l2), monkeypatch, tmp_path)
    assert t.schedules[k.name]["COLS_OUTER"] == outer
    few = LINEAR.replace("(96, 256)", "(512, 256)")  # few rows: columns outside whatever the cache
    (tmp_path / "few").mkdir()
    target, t, k = gemm_kernel(few, dict(AVX512, local_mem_per_group_bytes=512 << 10), monkeypatch, tmp_path / "few")
    assert t.schedules[k.name]["COLS_OUTER"] == 1
