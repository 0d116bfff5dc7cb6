"""A module built for a GPU feature refuses, in one line, a GPU without it: CUDA-C cubins are tied to
their architecture, Triton's TMA to Hopper, 3xTF32 to TF32 tensor cores."""

from __future__ import annotations

import types
from collections import namedtuple

import pytest

import akg_agent.translate as tr
from dsl_backends.module import REQUIRE
from ir.kernel.schedule import Schedule

from .conftest import problem_path

Device = namedtuple("Device", "type index")  # hashable, as torch.device is


def _require(requires, capability, name="NVIDIA A100-SXM4-80GB"):
    """The module's check, run against a stand-in GPU of `capability`."""
    cuda = types.SimpleNamespace(get_device_capability=lambda d: capability, get_device_name=lambda d: name)
    ns = {"torch": types.SimpleNamespace(cuda=cuda), "_AKG_REQUIRES": requires}
    exec(REQUIRE, ns)
    x = types.SimpleNamespace(device=Device("cuda", 0))
    ns["_akg_require"](x)


def _requires_of(source: str):
    line = next(ln for ln in source.splitlines() if ln.startswith("_AKG_REQUIRES = "))
    return eval(line.split("=", 1)[1])


def test_a_cuda_c_module_for_the_h100_refuses_an_a100_and_runs_on_an_h100():
    src = tr.render(tr.build(problem_path("mm_batched"), "cuda-c", "h100"))
    req = _requires_of(src)
    assert req == ((9, 0), "kernels compiled for sm_90a", True) and "_akg_require(A)" in src
    _require(req, (9, 0))
    with pytest.raises(RuntimeError, match=r"compute capability 9\.0 exactly \(kernels compiled for sm_90a\); "
                                           r"NVIDIA A100-SXM4-80GB is 8\.0: translate it again with --target"):
        _require(req, (8, 0))
    with pytest.raises(RuntimeError, match="is 10.0"):
        _require(req, (10, 0))


@pytest.mark.parametrize(("key", "value", "need"), [("TMA", True, (9, 0)), ("input_precision", "tf32x3", (8, 0))])
def test_triton_features_name_the_gpu_they_need(key, value, need, monkeypatch):
    t = tr.build(problem_path("mm_batched"), "triton", "h100")
    # the cost model may pick 3xTF32 for the H100: the plain module is its schedules without features
    t.schedules = {k: Schedule({p: v for p, v in s.items() if p not in ("TMA", "input_precision")})
                   for k, s in t.schedules.items()}
    plain = tr.render(t)
    assert "_AKG_REQUIRES" not in plain  # a plain Triton module JIT-compiles for whatever GPU runs it
    t.schedules = {k: s.replace(**{key: value}) for k, s in t.schedules.items()}
    req = _requires_of(tr.render(t))
    assert req[0] == need
    _require(req, need)
    with pytest.raises(RuntimeError, match="or newer"):
        _require(req, (7, 5), "Tesla T4")


def test_cpu_tensors_skip_the_check():
    ns = {"torch": None, "_AKG_REQUIRES": ((9, 0), "x", True)}
    exec(REQUIRE, ns)
    ns["_akg_require"](types.SimpleNamespace(device=Device("cpu", None)))
