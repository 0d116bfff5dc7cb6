"""A Pallas module in a process that sees several GPUs: JAX's start-up leaves the CUDA runtime on its last
GPU, and torch exports through DLPack only the tensors of its current device (on a 2-GPU host every Pallas
module failed with "Can't export tensors on a different CUDA device index")."""

from __future__ import annotations

import contextlib
import functools
import subprocess
import sys
from types import SimpleNamespace

import pytest
import torch

from akg_agent.translate import translate
from dsl_backends.pallas.render import PRELUDE
from tests.conftest import problem_path


class _Runtime:
    """torch.cuda and jax as the module sees them on a host of `n` GPUs; `jax.devices()` starts JAX,
    which makes the last GPU current, as XLA's client does."""

    def __init__(self, n: int) -> None:
        self.current, self.n, self.entered = 0, n, []
        rt = self

        class _Device:
            def __init__(self, d: torch.device) -> None:
                self.index = d.index

            def __enter__(self) -> None:
                self.prev, rt.current = rt.current, self.index
                rt.entered.append(self.index)

            def __exit__(self, *exc: object) -> None:
                rt.current = self.prev

        self.torch = SimpleNamespace(cuda=SimpleNamespace(
            is_available=lambda: True, current_device=lambda: rt.current,
            set_device=lambda i: setattr(rt, "current", i), device=_Device))
        self.jax = SimpleNamespace(devices=self._start)

    def _start(self) -> list[str]:
        self.current = self.n - 1
        return [f"gpu:{i}" for i in range(self.n)]


def _prelude(rt: _Runtime) -> dict[str, object]:
    ns: dict[str, object] = {"functools": functools, "contextlib": contextlib, "torch": rt.torch, "jax": rt.jax}
    exec(compile(PRELUDE, "<pallas prelude>", "exec"), ns)
    return ns


def test_starting_jax_leaves_torchs_device_where_it_was():
    rt = _Runtime(2)
    ns = _prelude(rt)
    assert ns["_akg_jax_devices"]() == ["gpu:0", "gpu:1"]
    assert rt.current == 0  # not the last GPU JAX left current


def test_a_launch_makes_its_tensors_gpu_current_and_puts_the_old_one_back():
    rt = _Runtime(4)
    ns = _prelude(rt)
    on = ns["_akg_on"]
    with on(SimpleNamespace(device=torch.device("cuda", 2))):
        assert rt.current == 2
    assert rt.current == 0 and rt.entered == [2]
    with on(SimpleNamespace(device=torch.device("cpu"))):  # the interpreter's tensors: nothing to set
        assert rt.current == 0
    assert rt.entered == [2]


DRIVER = """
import importlib.util, sys, torch
sys.path.insert(0, sys.argv[2])
spec = importlib.util.spec_from_file_location("cand", sys.argv[1])
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
ref = importlib.util.spec_from_file_location("ref", sys.argv[3])
refmod = importlib.util.module_from_spec(ref)
ref.loader.exec_module(refmod)
last = torch.cuda.device_count() - 1
for dev in (f"cuda:{last}", "cuda:0"):
    torch.manual_seed(0)
    xs = [x.to(dev) if torch.is_tensor(x) else x for x in refmod.get_inputs()]
    want = refmod.Model(*refmod.get_init_inputs()).to(dev)(*xs)
    got = mod.ModelNew(*refmod.get_init_inputs()).to(dev)(*xs)
    print(dev, got.device, torch.cuda.current_device(), float((got - want).abs().max()))
"""


@pytest.mark.gpu
def test_a_pallas_module_runs_on_any_gpu_of_a_host_of_several(tmp_path):
    if torch.cuda.device_count() < 2:
        pytest.skip("needs a process that sees two GPUs (run without benchmarks/gpu/pytest_gpu_split.py)")
    path = problem_path("ew_activations_a")
    t = translate(path, "pallas", "h100", tmp_path / "m.py", timing=False, seeds=(0,))
    assert t.verdict.accepted, t.verdict.line()  # the verifier's own process sees every GPU too
    last = torch.cuda.device_count() - 1
    r = subprocess.run([sys.executable, "-c", DRIVER, str(tmp_path / "m.py"), str(path.parent), str(path)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    rows = [ln.split() for ln in r.stdout.splitlines()]
    assert [(a, b, c) for a, b, c, _ in rows] == [(f"cuda:{last}", f"cuda:{last}", "0"), ("cuda:0", "cuda:0", "0")]
    assert all(float(e) < 1e-4 for *_, e in rows)


def _runtime_ns(jax_stub: object) -> dict[str, object]:
    import jax.numpy as jnp

    from dsl_backends.pallas.backend import RUNTIME
    ns: dict[str, object] = {"functools": functools, "torch": torch, "jax": jax_stub, "jnp": jnp}
    exec(compile(RUNTIME, "<pallas runtime>", "exec"), ns)
    return ns


def test_where_jaxs_private_import_fails_a_launch_takes_the_public_from_dlpack_and_keeps_it():
    got: list[object] = []
    stub = SimpleNamespace(enable_x64=None, dlpack=SimpleNamespace(from_dlpack=lambda a: got.append(a) or a))
    ns = _runtime_ns(stub)
    t = SimpleNamespace(device=SimpleNamespace(type="cuda", index=0))
    t.reshape = t.detach = lambda *_: t  # no CUDA backend in this JAX: the fast import raises, the public path runs
    assert ns["_akg_to_jax"]([t, t]) == [t, t] and got == [t, t]
    assert ns["_AKG_IMPORT"] == [None]
    assert ns["_akg_to_jax"]([t]) == [t] and len(got) == 3  # not tried again


def test_cpu_tensors_go_through_the_public_from_dlpack():
    got: list[object] = []
    stub = SimpleNamespace(enable_x64=None, dlpack=SimpleNamespace(from_dlpack=lambda a: got.append(a) or a))
    ns = _runtime_ns(stub)
    x = torch.arange(6.0).reshape(2, 3)
    (v,) = ns["_akg_to_jax"]([x])
    assert v.shape == (6,) and got == [v] and ns["_AKG_IMPORT"] == []


def test_a_tensor_that_requires_grad_is_imported_as_its_values():
    import jax  # a model's weights require grad: DLPack refuses to export such a tensor

    ns = _runtime_ns(jax)
    w = torch.nn.Parameter(torch.arange(6.0).reshape(2, 3))
    (v,) = ns["_akg_to_jax"]([w])
    assert v.shape == (6,) and v.tolist() == list(range(6))


ORDER = """
import importlib.util, sys, torch
sys.path.insert(0, sys.argv[2])
def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
mod, ref = load("cand", sys.argv[1]), load("ref", sys.argv[3])
m, want = mod.ModelNew(), ref.Model()
worst = 0.0
for i in range(20):  # each input made by a long torch kernel just before the launch: JAX must wait for it
    a = torch.randn(2048, 2048, device="cuda")
    x = (a @ a).reshape(-1)[:8 * 16 * 32].reshape(8, 16, 32) * 1e-3 + i
    y = torch.randn(16, 1, device="cuda") + i
    got = m(x, y)
    torch.cuda.synchronize()
    w = want(x, y)
    worst = max(worst, float((got - w).abs().max() / (w.abs().max() + 1)))
print(mod._AKG_IMPORT not in ([], [None]), worst)
"""


@pytest.mark.gpu
def test_a_pallas_launch_imports_its_inputs_with_one_handshake_and_waits_for_torchs_stream(tmp_path):
    path = problem_path("ew_binary_broadcast")
    t = translate(path, "pallas", "h100", tmp_path / "m.py", timing=False, seeds=(0,))
    assert t.verdict.accepted, t.verdict.line()
    r = subprocess.run([sys.executable, "-c", ORDER, str(tmp_path / "m.py"), str(path.parent), str(path)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    used, worst = r.stdout.split()[-2:]
    assert used == "True"  # the one-handshake import was checked and taken, not JAX's public path
    assert float(worst) < 1e-5


class _FakeCuda:
    """A CUDA tensor as the one-handshake import sees it: its DLPack export records the stream it was asked for."""

    def __init__(self, ptr: int, exports: list[object]) -> None:
        self.ptr, self.exports = ptr, exports
        self.device, self.dtype = SimpleNamespace(type="cuda", index=0), torch.float32

    def reshape(self, *_: object) -> _FakeCuda:
        return self

    def detach(self) -> _FakeCuda:
        return self

    def numel(self) -> int:
        return 4

    def data_ptr(self) -> int:
        return self.ptr

    def __dlpack_device__(self) -> tuple[int, int]:
        return (2, 0)

    def __dlpack__(self, stream: object = None) -> tuple[str, int]:
        self.exports.append(stream)
        return ("capsule", self.ptr)


@pytest.mark.parametrize("takes_kind", [True, False])
def test_the_one_handshake_import_finds_jaxlibs_signature_once_and_syncs_only_the_first_tensor(monkeypatch, takes_kind):
    import jax.numpy as jnp
    from jax._src import xla_bridge
    from jax._src.lib import _jax

    calls: list[int] = []

    def to_buffer(cap, dev, stream, copy, *kind):
        calls.append(len(kind))
        if bool(kind) != takes_kind:
            raise TypeError("signature")
        return SimpleNamespace(unsafe_buffer_pointer=lambda: cap[1], shape=(4,), dtype=jnp.float32)

    dev = SimpleNamespace(get_stream_for_external_ready_events=lambda: 77)
    monkeypatch.setattr(xla_bridge, "get_backend", lambda name: SimpleNamespace(
        device_from_local_hardware_id=lambda i: dev))
    monkeypatch.setattr(_jax, "dlpack_managed_tensor_to_buffer", to_buffer, raising=False)
    public: list[object] = []
    ns = _runtime_ns(SimpleNamespace(enable_x64=None, dlpack=SimpleNamespace(from_dlpack=public.append)))
    exports: list[object] = []
    a, b = _FakeCuda(100, exports), _FakeCuda(200, exports)
    views = ns["_akg_to_jax"]([a, b])
    assert [v.unsafe_buffer_pointer() for v in views] == [100, 200] and not public
    assert exports == [77, -1]  # JAX's stream waits once, for the launch's first tensor
    assert ns["_AKG_IMPORT"] == [takes_kind]
    calls.clear()
    ns["_akg_to_jax"]([b, a])
    assert calls == [int(takes_kind)] * 2  # the signature is known: no failed call on later launches
