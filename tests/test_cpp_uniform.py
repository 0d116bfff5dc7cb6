"""Per-call costs of small C++ modules on the host: a select with one costly arm (ELU's `x > 0 ? x :
expm1(x)`) tests its condition per block and skips the math where a block takes the cheap arm (torch's
kernels skip it per vector, so positive inputs ran 3x faster in eager); forward checks its fixed-size
envelope inline and allocates an output shaped like an input with empty_like. Values: torch's, NaN and
infinities included, on blocks of every kind and a partial last one."""

from __future__ import annotations

import re

import pytest
import torch

from akg_agent.translate import build, render

from .helpers import import_written, problem_namespace

PROBLEM = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return {body}


def get_inputs():
    x = torch.randn(3, 1000)
    x[0] = x[0].abs() + 0.1  # every block positive: the cheap arm alone
    x[1, 100:300] = x[1, 100:300].abs()  # blocks of both kinds
    x[2, :6] = torch.tensor([float("nan"), float("inf"), float("-inf"), -0.0, 0.0, -1e-8])
    return [x]


def get_init_inputs():
    return []
'''


def _written(tmp_path, monkeypatch, name, body):
    monkeypatch.setenv("AKG_CACHE_DIR", str(tmp_path / "cache"))
    text = PROBLEM.format(body=body)
    path = tmp_path / f"{name}.py"
    path.write_text(text)
    src = render(build(path, "cpp", "cpu", tuned=False))
    return src, import_written(tmp_path, src, f"{name}_m"), problem_namespace(text)


@pytest.mark.parametrize(("name", "body"), [
    ("elu", "torch.nn.functional.elu(x, alpha=0.7)"),
    ("selu", "torch.selu(x)"),
    ("celu", "torch.nn.functional.celu(x, alpha=2.0)"),
])
def test_a_select_with_one_costly_arm_skips_it_per_block_and_matches_torch(tmp_path, monkeypatch, name, body):
    src, mod, ns = _written(tmp_path, monkeypatch, name, body)
    kernels = src[re.search(r'extern "C" (AKG_WIDE )?void', src).start():]  # AKG_WIDE: an AVX-512 host's
    assert "reduction(&:akg_all)" in kernels and "if (akg_all) {" in kernels
    cheap = kernels[kernels.index("if (akg_all) {"):kernels.index("} else {")]
    assert "expm1f" not in cheap and "expf" not in cheap  # the cheap arm calls no math
    x = ns["get_inputs"]()[0]
    got, want = mod.ModelNew()(x), ns["Model"]()(x)
    torch.testing.assert_close(got, want, equal_nan=True)
    assert torch.equal(torch.isnan(got), torch.isnan(want))


def test_selects_without_one_costly_arm_keep_the_plain_loop(tmp_path, monkeypatch):
    # neither arm costly (a relu-like select), and both arms costly
    for name, body in (("cheap", "torch.where(x > 0, x * 2.0, x - 1.0)"),
                       ("costly", "torch.where(x > 0, torch.exp(x), torch.tanh(x))")):
        src, mod, ns = _written(tmp_path, monkeypatch, name, body)
        assert "akg_all" not in src
        x = ns["get_inputs"]()[0]
        torch.testing.assert_close(mod.ModelNew()(x), ns["Model"]()(x), equal_nan=True)


def test_forward_checks_a_fixed_envelope_inline_and_allocates_like_its_input(tmp_path, monkeypatch):
    src, mod, _ = _written(tmp_path, monkeypatch, "elu_guard", "torch.nn.functional.elu(x)")
    forward = src[src.index("    def forward"):]
    assert "x.shape == (3, 1000) and x.dtype is torch.float32 and x.is_cpu" in forward
    assert "torch.empty_like(x)" in forward and "torch.empty((" not in forward
    m = mod.ModelNew()
    # what the inline test refuses, the full check names: shape, dtype, and a number
    with pytest.raises(ValueError, match=r"expected float32 \[3, 1000\].*got float32 \[3, 999\]"):
        m(torch.randn(3, 999))
    with pytest.raises(ValueError, match="got float64"):
        m(torch.randn(3, 1000, dtype=torch.float64))
    with pytest.raises(TypeError, match="expected a tensor, got float"):
        m(1.0)
    # a non-contiguous input of the right shape: made contiguous, its output contiguous
    xt = torch.randn(1000, 3).t()
    out = m(xt)
    assert out.is_contiguous() and torch.allclose(out, torch.nn.functional.elu(xt))


def test_kernels_are_called_through_the_extension_where_pythons_headers_exist_else_ctypes(tmp_path, monkeypatch):
    import ctypes
    import sysconfig

    src, mod, ns = _written(tmp_path, monkeypatch, "elu_ext", "torch.nn.functional.elu(x) * 2.0")
    assert "PyInit_akg_kernels" in src and "-DAKG_PYEXT" in mod._AKG_CMD
    assert not isinstance(mod._AKG_LIB, ctypes.CDLL)  # the extension module
    x = ns["get_inputs"]()[0]
    want = ns["Model"]()(x)
    torch.testing.assert_close(mod.ModelNew()(x), want, equal_nan=True)
    kernel = next(n for n in dir(mod._AKG_LIB) if n.startswith("k0_"))
    with pytest.raises(TypeError, match=f"{kernel} takes 2 arguments \\(1 given\\)"):
        getattr(mod._AKG_LIB, kernel)(x.data_ptr())
    # no headers: the same source built without its bindings, called through ctypes
    paths = sysconfig.get_paths()
    monkeypatch.setattr(sysconfig, "get_paths", lambda *a, **k: {**paths, "include": str(tmp_path / "none")})
    plain = import_written(tmp_path, src, "elu_ext_ctypes")
    assert isinstance(plain._AKG_LIB, ctypes.CDLL) and "-DAKG_PYEXT" not in plain._AKG_CMD
    torch.testing.assert_close(plain.ModelNew()(x), want, equal_nan=True)
