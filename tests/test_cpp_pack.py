"""The C++ blocked GEMM's packed weights kept with the module: packed once, reused while the weights stay
the same, packed again after every kind of write to them (tracked by torch's version counter, or not)."""

from __future__ import annotations

import copy
import importlib.util

import pytest
import torch

from akg_agent.translate import build, render
from akg_agent.verifier import verify

PROBLEM = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(96, 80)

    def forward(self, x, w):
        return torch.relu(self.fc(x)), x @ w  # a weight of the module; an operand of the call


def get_inputs():
    return [torch.randn(24, 96), torch.randn(96, 40)]


def get_init_inputs():
    return []
'''


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("pack")
    problem = tmp / "p.py"
    problem.write_text(PROBLEM)
    text = render(build(problem, "cpp", "cpu", tuned=False, pure=True))
    cand = tmp / "cand.py"
    cand.write_text(text)
    v = verify(problem, cand, target="cpu", seeds=(0, 1))
    assert v.accepted, v.line()
    mods = []
    for name, path in (("pack_ref", problem), ("pack_cand", cand)):
        spec = importlib.util.spec_from_file_location(name, path)
        mods.append(importlib.util.module_from_spec(spec))
        spec.loader.exec_module(mods[-1])
    return text, mods[0], mods[1]


def _pair(written):
    _, ref_mod, cand_mod = written
    torch.manual_seed(0)
    ref = ref_mod.Model().eval()
    m = cand_mod.ModelNew().eval()
    m.load_state_dict(ref.state_dict())
    return ref, m


def _check(ref, m):
    x, w = torch.randn(24, 96), torch.randn(96, 40)
    for got, want in zip(m(x, w), ref(x, w)):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def _kept(m):
    (name, (key, buf)), = m._akg_packs.items()  # one GEMM reads parameters: the other's B is an input
    return buf


def test_only_a_gemm_on_parameters_keeps_its_packing(written):
    text = written[0]
    assert text.count("_akg_pack_take(self,") == 1 and "'fc.weight'" in text
    assert text.count("akg_pack_scratch<float>(") == 1  # the operand's GEMM packs per call (a per-thread buffer)


def test_packed_once_then_reused(written):
    ref, m = _pair(written)
    _check(ref, m)
    first = _kept(m)
    _check(ref, m)
    assert _kept(m) is first


@pytest.mark.parametrize("how", ["in_place", "load_state_dict", "new_parameter", "data_assigned"])
def test_written_weights_are_packed_again(written, how):
    ref, m = _pair(written)
    _check(ref, m)
    first = _kept(m)
    new = torch.randn(80, 96)
    with torch.no_grad():
        ref.fc.weight.copy_(new)
        if how == "in_place":
            m.fc.weight.copy_(new)
        elif how == "load_state_dict":
            m.load_state_dict(ref.state_dict())
        elif how == "new_parameter":
            m.fc.weight = torch.nn.Parameter(new.clone(), requires_grad=False)
        else:  # the same Parameter object, new storage, its version counter kept
            m.fc.weight.data = new.clone()
    _check(ref, m)
    assert _kept(m) is not first


def test_a_write_the_version_counter_misses_is_caught_by_the_kernel(written):
    ref, m = _pair(written)
    _check(ref, m)
    version = m.fc.weight._version
    new = torch.randn(80, 96)
    ref.fc.weight.data.copy_(new)
    m.fc.weight.data.copy_(new)  # `.data` has a counter of its own: the module's says nothing changed
    assert m.fc.weight._version == version
    _check(ref, m)  # the kernel found its copy stale at a sampled place and packed for this call
    assert not m._akg_packs  # and the module dropped it
    _check(ref, m)
    _kept(m)


def test_a_copied_module_keeps_its_own(written):
    ref, m = _pair(written)
    _check(ref, m)
    twin = copy.deepcopy(m)
    with torch.no_grad():
        twin.fc.weight.mul_(-1.0)
    _check(ref, m)
    x, w = torch.randn(24, 96), torch.randn(96, 40)
    with torch.no_grad():
        ref.fc.weight.mul_(-1.0)
    torch.testing.assert_close(twin(x, w)[0], ref(x, w)[0], rtol=1e-5, atol=1e-5)
