"""A module written through torch.compile runs with the code its verification compiled (`akg_agent/built.py`):
the verifier's run keeps its build in the cache entry, and the module's import (C++) and first call (Triton)
load it from there instead of compiling again in the caller's process; the verifier's fork server starts
when the model is compiled, not at the first verification."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn

import akg_agent
from akg_agent.built import FirstCallBuilt, built_in
from dsl_backends import build_env


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(16, 32), nn.Linear(32, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(torch.relu(self.a(x)))


def _entries(cache):
    return [d for d in (cache / "compiled").iterdir() if (d / "module.py").is_file()]


def test_build_variables_name_the_folder_and_are_restored(tmp_path, monkeypatch):
    monkeypatch.setenv("AKG_CACHE_DIR", "/somewhere/else")
    monkeypatch.delenv("TRITON_CACHE_DIR", raising=False)
    env = build_env(tmp_path)
    assert env["AKG_CACHE_DIR"] == str(tmp_path) and env["TRITON_CACHE_DIR"] == f"{tmp_path}/.triton"
    import os
    seen = []
    fn = FirstCallBuilt(lambda: seen.append((os.environ["AKG_CACHE_DIR"], os.environ.get("TRITON_CACHE_DIR"))),
                        tmp_path)
    fn()
    fn()
    assert seen == [(str(tmp_path), f"{tmp_path}/.triton"), ("/somewhere/else", None)]
    with pytest.raises(RuntimeError), built_in(tmp_path):
        raise RuntimeError("a failing first call")
    assert os.environ["AKG_CACHE_DIR"] == "/somewhere/else" and "TRITON_CACHE_DIR" not in os.environ


def test_a_cpp_module_loads_the_library_its_verification_built(tmp_path, monkeypatch):
    user = tmp_path / "user"
    monkeypatch.setenv("AKG_CACHE_DIR", str(user))  # where the caller's own builds would go
    torch.manual_seed(0)
    model = MLP().eval()
    compiled = akg_agent.compile(model, dsl="cpp", target="cpu", cache_dir=str(tmp_path / "c"), seeds=(0,))
    x = torch.randn(4, 16)
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), model(x), rtol=1e-5, atol=1e-5)
    (entry,) = [d for d in (tmp_path / "c").iterdir() if (d / "module.py").is_file()]
    assert list((entry / "build" / "cpp").glob("*/kernels.so"))  # the verifier's build, kept in the entry
    assert not (user / "cpp").exists()  # and the caller compiled nothing of its own


@pytest.mark.gpu
def test_a_triton_module_compiles_no_kernel_in_the_callers_process(tmp_path, monkeypatch):
    from triton.compiler import compiler

    made = []
    make_ir = compiler.ASTSource.make_ir
    monkeypatch.setattr(compiler.ASTSource, "make_ir", lambda self, *a, **k: made.append(self.name)
                        or make_ir(self, *a, **k))  # only a cache miss builds the IR
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "user-triton"))
    torch.manual_seed(0)
    model = MLP().eval().cuda()
    compiled = akg_agent.compile(model, cache_dir=str(tmp_path / "c"), seeds=(0,), cuda_graphs="off")
    x = torch.randn(4, 16, device="cuda")
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), model(x), rtol=1e-4, atol=1e-4)
    assert made == [], made  # every kernel's cubin came from the verifier's build


def _stopped_server(monkeypatch, cpu: bool):
    from akg_agent.verifier import sandbox

    monkeypatch.delenv("AKG_VERIFIER_FORK", raising=False)
    server = sandbox.zygote(cpu)
    with server.lock:  # a server left by another test is stopped: this one must be started by akg
        if server.proc is not None:
            server.proc.kill()
            server.proc.wait()
        server.proc = None
    return server


def test_a_cpu_compile_starts_the_verifiers_fork_server_at_its_first_translation(tmp_path, monkeypatch):
    """Not ahead on a CPU target (its imports would take the cores of a module served from the cache,
    tests/test_dynamo.py), but by the first call that misses the cache, which verifies."""
    server = _stopped_server(monkeypatch, cpu=True)
    compiled = akg_agent.compile(MLP().eval(), dsl="cpp", target="cpu", cache_dir=str(tmp_path), seeds=(0,))
    assert server.proc is None
    with torch.no_grad():
        compiled(torch.randn(4, 16))
    assert server.proc is not None and server.proc.poll() is None


@pytest.mark.gpu
def test_a_gpu_compile_starts_the_verifiers_fork_server_before_the_first_call(monkeypatch):
    """Its imports (torch, seconds) overlap dynamo's trace instead of following it."""
    server = _stopped_server(monkeypatch, cpu=False)
    akg_agent.compile(MLP().eval().cuda())
    assert server.proc is not None and server.proc.poll() is None


PROBLEM = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(16, 8)

    def forward(self, x):
        return torch.relu(self.a(x)) * 2.0


def get_inputs():
    return [torch.randn(4, 16)]


def get_init_inputs():
    return []
'''


@pytest.mark.parametrize("dsl", ["cpp", "triton"])
def test_the_written_module_keeps_the_lines_its_verification_ran(tmp_path, monkeypatch, dsl):
    """Triton's cache key holds each kernel's first line number: a header that grows once the verdict is
    known would move every kernel, and the module would compile them all again at its first call."""
    from akg_agent import translate as tr

    ran = []
    verify = tr.verify
    monkeypatch.setattr(tr, "verify", lambda problem, cand, *a: ran.append(cand.read_text()) or
                        verify(problem, cand, *a))
    problem = tmp_path / "p.py"
    problem.write_text(PROBLEM)
    t = tr.translate(problem, dsl, "cpu" if dsl == "cpp" else "h100", timing=False, seeds=(0,))
    assert t.verdict is not None and t.verdict.accepted and len(ran) == 1
    before, after = ran[0].splitlines(), t.source.splitlines()
    assert len(before) == len(after)
    body = [i for i, (x, y) in enumerate(zip(before, after)) if x != y]
    assert body and all(before[i].startswith("#") for i in body), body  # only header lines differ
    assert any("verification: not run" in x for x in before) and any("verification: accepted" in x for x in after)


def test_a_training_forward_hands_its_saved_weights_back_without_a_copy(tmp_path):
    """AOTAutograd's forward returns the weights its backward reads: the written module computes the rest
    and the weights come back as the parameters themselves (they were copied by a kernel each step)."""
    from akg_agent.dynamo import _passed

    def f(x, w):
        return torch.relu(x @ w), w, x

    def traced(fn):
        gm = torch.fx.symbolic_trace(fn)
        for n in gm.graph.nodes:  # what dynamo records for each value
            if n.op == "placeholder":
                n.meta["val"] = torch.empty(2, 2)
        return gm

    assert _passed(traced(f)) == {1: 1, 2: 0}
    assert _passed(traced(lambda x, w: (torch.relu(x), w))) == {1: 1}
    assert _passed(traced(lambda x, w: (w, x))) == {}  # nothing would be left to write

    torch.manual_seed(0)
    model, ref = MLP(), MLP()
    ref.load_state_dict(model.state_dict())
    compiled = akg_agent.compile(model, dsl="cpp", target="cpu", cache_dir=str(tmp_path / "c"), seeds=(0,))
    x = torch.randn(4, 16)
    compiled(x).square().sum().backward()
    ref(x).square().sum().backward()
    for (name, p), q in zip(model.named_parameters(), ref.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-5, msg=lambda m, n=name: f"{n}: {m}")
    sources = [(d / "module.py").read_text() for d in (tmp_path / "c").iterdir() if (d / "module.py").is_file()]
    assert len(sources) == 2 and not any("_out" in ln for src in sources for ln in src.splitlines()
                                         if ln.startswith("#   k") and "primals" in ln), sources[0][:3000]


TINY = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x * 2.0


def get_inputs():
    return [torch.randn(8)]


def get_init_inputs():
    return []
'''


def test_a_modules_fork_server_imports_only_what_its_dsl_preloads(tmp_path, monkeypatch):
    """A C++ or Triton module's CPU jobs fork from a server that never imported TileLang or JAX (about 2 s
    of a first call on a 2-core host); a module that imports TileLang gets a server that preloaded it."""
    from akg_agent.verifier import sandbox, verify
    from dsl_backends import preload, preload_for_source

    monkeypatch.delenv("AKG_VERIFIER_FORK", raising=False)
    assert preload(True, "cpp") == [] and preload(True, "tilelang") == ["tilelang", "tilelang.language"]
    assert preload_for_source("import torch\nimport tilelang.language as T\n") == ["tilelang", "tilelang.language"]
    assert preload_for_source("from jax.experimental import pallas as pl\n") == ["jax.experimental.pallas.tpu"]
    assert preload_for_source("import triton  # not tilelang\n") == []
    ref = tmp_path / "p.py"
    ref.write_text(TINY)
    cand = tmp_path / "c.py"  # fails verification where its server had imported either package
    cand.write_text("import sys\nassert not {'tilelang', 'jax'} & set(sys.modules), 'preloaded'\n"
                    "AKG_LIBRARY_CALLS = ['aten.mul']\n" + TINY.replace("class Model", "class ModelNew"))
    v = verify(ref, cand, target="cpu", seeds=(0,))
    assert v.accepted, v.line()
    assert sandbox.zygote(True).proc is not None and sandbox.zygote(True).preloads == ()


def test_a_cpp_library_is_built_before_its_verification_without_running_the_module(tmp_path, monkeypatch):
    """While the verifier's fork server imports torch, translate builds a C++ module's library where the
    worker's import will look (`dsl_backends/cpp/prebuild.py`): the import then finds it and builds nothing.
    Only akg's own build helpers run in the caller: the module's text is parsed, never executed; a module
    that is not a rendered C++ one is left alone."""
    import akg_agent.translate as tr
    from akg_agent.translate import build, render
    from dsl_backends.cpp.prebuild import prebuild

    from .helpers import import_written

    problem = tmp_path / "p.py"
    problem.write_text(PROBLEM)
    src = render(build(problem, "cpp", "cpu", tuned=False))
    marker = tmp_path / "ran"  # a statement of the module's that would leave this file if it ran
    src = src.replace("import torch\n", f"import torch\nopen({str(marker)!r}, 'w').close()\n", 1)
    lib = prebuild(src, tmp_path / "b")
    assert lib is not None and (tmp_path / "b" / "cpp").is_dir() and not marker.exists()
    built = sorted((tmp_path / "b").rglob("*"))
    monkeypatch.setenv("AKG_CACHE_DIR", str(tmp_path / "b"))
    mod = import_written(tmp_path, src, "prebuilt_module")
    assert sorted((tmp_path / "b").rglob("*")) == built and str(mod._AKG_LIB.__file__) == lib  # nothing built
    assert prebuild("import triton\nX = 1\n", tmp_path / "c") is None and not (tmp_path / "c").exists()
    # translate starts it where the verification keeps its build (the dynamo path), in a thread
    calls = []
    monkeypatch.setattr("dsl_backends.cpp.prebuild.prebuild", lambda text, where: calls.append(where))
    tr.translate(problem, "cpp", "cpu", timing=False, seeds=(0,), build_cache=tmp_path / "d")
    assert calls == [tmp_path / "d"]
