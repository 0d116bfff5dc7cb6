"""The C++ blocked GEMM over bf16 operands: B packed as bf16 pairs (two K rows interleaved column by column),
A's panel as bf16 bits, the register tile one AVX512-BF16 dot product per two K rows where the host has
them, a shift and a mask into two FMAs where it has not; checked natively against the reference."""

from __future__ import annotations

import importlib.util

import pytest
import torch

from akg_agent.translate import build, render
from akg_agent.verifier import verify
from dsl_backends.cpp.tile import vector_width

MATMUL = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.relu(a @ b)


def get_inputs():
    return [torch.randn(37, 70, dtype=torch.bfloat16), torch.randn(70, 45, dtype=torch.bfloat16)]


def get_init_inputs():
    return []
'''

LINEAR = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(96, 80).to(torch.bfloat16)

    def forward(self, x):
        return self.fc(x)


def get_inputs():
    return [torch.randn(24, 96, dtype=torch.bfloat16)]


def get_init_inputs():
    return []
'''

BMM = MATMUL.replace("a @ b", "torch.bmm(a, b)").replace("(37, 70,", "(3, 5, 70,").replace("(70, 45,", "(3, 70, 19,")
ODD_K = MATMUL.replace("70", "71")

TILES = {"default": None,  # every K panel, column and row tail below: KC 32 over K 70 leaves a panel of 6
         "panels": {"MR": 4, "NR": 16, "NB": 32, "KC": 32, "COLS_OUTER": 0},
         "eight-wide": {"MR": 4, "NR": 8, "NB": 16, "KC": 16, "COLS_OUTER": 1}}  # 8 floats a vector: no dot


def _written(src: str, tmp_path, tile: dict | None = None) -> tuple[str, dict, int]:
    path = tmp_path / "p.py"
    path.write_text(src)
    t = build(path, "cpp", "cpu", tuned=False, pure=True)
    [k] = [k for k in t.program.kernels() if k.kind == "matmul"]
    if tile:
        t.schedules[k.name] = t.schedules[k.name].replace(**tile)
    s = t.schedules[k.name]
    return render(t), s, vector_width(s["NR"], int(t.target.chip("simd_width"))) or 0


def _verified(src: str, text: str, tmp_path) -> None:
    (tmp_path / "p.py").write_text(src)
    cand = tmp_path / "cand.py"
    cand.write_text(text)
    v = verify(tmp_path / "p.py", cand, target="cpu", seeds=(0, 1))
    assert v.accepted, v.line()


@pytest.mark.parametrize("tile", list(TILES))
def test_bf16_gemms_pack_pairs_and_verify(tile, tmp_path):
    text, s, vec = _written(MATMUL, tmp_path, TILES[tile])
    assert "uint16_t* akg_bp = akg_pack_scratch<uint16_t>(" in text and "uint16_t akg_ap[" in text
    assert "akg_q += 2" in text  # two K rows a step
    assert ("_mm512_dpbf16_ps" in text) == (vec == 16)  # the dot product takes 16 columns' pairs
    assert "akg_w0 << 16" in text  # and the portable path beside it (or alone)
    _verified(MATMUL, text, tmp_path)


def test_the_portable_pair_tile_verifies_where_the_host_has_the_dot_product(tmp_path):
    text, _, vec = _written(MATMUL, tmp_path)
    if vec != 16:
        pytest.skip("no 16-float vectors here: the portable path is the only one (the tile tests cover it)")
    forced = text.replace("#if defined(__AVX512BF16__)", "#if 0")
    assert forced != text
    _verified(MATMUL, forced, tmp_path)


def test_rows_of_a_block_in_different_batches_read_pairs_element_by_element(tmp_path):
    text, s, _ = _written(BMM, tmp_path, {"MR": 4, "NR": 16, "NB": 32, "KC": 32, "COLS_OUTER": 0})
    assert "uint16_t akg_ap[" in text and f"akg_c[{s['MR']}][{s['NR']}]" in text  # the array tile, over pairs
    _verified(BMM, text, tmp_path)


def test_an_odd_k_packs_floats(tmp_path):
    text, _, _ = _written(ODD_K, tmp_path)
    assert "akg_pack_scratch<float>(" in text and "uint16_t akg_ap[" not in text and "_mm512_dpbf16_ps" not in text
    _verified(ODD_K, text, tmp_path)


def _load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_a_bf16_linear_keeps_its_weights_packed_as_pairs(tmp_path):
    text, _, _ = _written(LINEAR, tmp_path)
    assert "torch.int16)" in text and "_akg_pack_take(self," in text
    _verified(LINEAR, text, tmp_path)
    ref_mod, cand_mod = _load(tmp_path / "p.py", "bf16_ref"), _load(tmp_path / "cand.py", "bf16_cand")
    torch.manual_seed(0)
    ref, m = ref_mod.Model().eval(), cand_mod.ModelNew().eval()
    m.load_state_dict(ref.state_dict())
    x = torch.randn(24, 96, dtype=torch.bfloat16)

    def check() -> None:
        want = (x.double() @ ref.fc.weight.double().T + ref.fc.bias.double())
        torch.testing.assert_close(m(x).double(), want, rtol=2e-2, atol=2e-2)

    check()
    (_, kept), = m._akg_packs.values()
    assert kept.dtype == torch.int16 and kept.numel() >= 96 * 80
    new = torch.randn(80, 96).to(torch.bfloat16)
    ref.fc.weight.data.copy_(new)
    m.fc.weight.data.copy_(new)  # behind the version counter: the kernel's sampled check catches it
    check()
    assert not m._akg_packs
    check()
    assert m._akg_packs
