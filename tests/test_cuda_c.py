"""CUDA-C specifics: the compile-only path here, the written module's behaviour without a GPU, and on
the device compute-sanitizer memcheck over the whole suite."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest
import torch

from akg_agent.cli import main
from akg_agent.translate import build, render

from .conftest import PROBLEMS, ROOT, problem_path

pytestmark = pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc (the CUDA toolkit)")


def test_translate_without_a_gpu_compiles_and_says_not_run(tmp_path, capsys):
    out = tmp_path / "m.py"
    assert main(["translate", str(problem_path("red_argmax_argmin")), "--dsl", "cuda-c", "--target", "h100",
                 "-o", str(out), "--run-dir", str(tmp_path / "run")]) == 0
    text = capsys.readouterr().out
    assert "NOT verified: compiled with nvcc for sm_90a" in text and "not run" in text
    src = out.read_text()
    assert "# verification: NOT verified: compiled with nvcc for sm_90a" in src
    assert "akg_block_arg<1>" in src  # argmax reduces across the block with its index


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the behaviour without a GPU")
def test_written_module_without_a_gpu_says_why(tmp_path):
    path = tmp_path / "m.py"
    path.write_text(render(build(problem_path("ew_activations_a"), "cuda-c", "h100")))
    code = (f"import importlib.util, torch; s = importlib.util.spec_from_file_location('m', {str(path)!r}); "
            "m = importlib.util.module_from_spec(s); s.loader.exec_module(m); m._akg_lib()")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode != 0 and "needs an NVIDIA GPU" in r.stderr


def test_nvcc_error_is_one_line(monkeypatch):
    from dsl_backends.cuda_c import backend as cb
    from ir.errors import AkgError

    t = build(problem_path("ew_activations_a"), "cuda-c", "h100")
    monkeypatch.setattr(cb, "PRELUDE_CU", cb.PRELUDE_CU + "\nthis is not C++;\n")
    with pytest.raises(AkgError, match=r"nvcc could not compile the CUDA-C kernels: kernels.cu\(\d+\): error"):
        cb.BACKEND.compile_only(t.program, t.schedules, t.target)


@pytest.mark.gpu
def test_memcheck_over_the_suite(tmp_path):
    if shutil.which("compute-sanitizer") is None:
        pytest.skip("no compute-sanitizer")
    mods = tmp_path / "mods"
    mods.mkdir()
    for p in PROBLEMS:
        (mods / p.name).write_text(render(build(p, "cuda-c", "h100")))
    path = os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])
    env = dict(os.environ, AKG_CACHE_DIR=str(tmp_path / "cache"), PYTHONPATH=path)
    driver = str(ROOT / "tests" / "tools" / "cuda_suite_driver.py")
    problems = str(ROOT / "tests" / "problems")
    subprocess.run([sys.executable, driver, "build", str(mods), problems], env=env, check=True, timeout=900)
    r = subprocess.run(["compute-sanitizer", "--tool", "memcheck", "--error-exitcode", "7", "--print-limit", "20",
                        sys.executable, driver, "run", str(mods), problems], env=env, capture_output=True, text=True,
                       timeout=1500)
    ran = r.stdout.count("\nran ") + r.stdout.startswith("ran ")
    assert r.returncode == 0, (r.stdout[-3000:], r.stderr[-3000:])
    assert ran == len(PROBLEMS) and "ERROR SUMMARY: 0 errors" in r.stdout + r.stderr


BF16_GEMM = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(256, 192).to(torch.bfloat16)

    def forward(self, x):
        return torch.relu(self.linear(x)) * 0.5


def get_inputs():
    return [torch.randn(130, 256, dtype=torch.bfloat16)]


def get_init_inputs():
    return []
'''


def test_bf16_gemm_uses_tensor_cores(tmp_path):
    path = tmp_path / "bf16_gemm.py"
    path.write_text(BF16_GEMM)
    t = build(path, "cuda-c", "h100")
    [mm] = [k for k in t.program.kernels() if k.kind == "matmul"]
    assert t.schedules[mm.name]["MMA"] == "wmma"
    src = render(t)
    assert "wmma::mma_sync" in src and "__nv_bfloat16 akg_As" in src
    from akg_agent.translate import compile_only

    assert compile_only(t).startswith("compiled with nvcc for sm_90a")


@pytest.mark.gpu
def test_bf16_gemm_on_tensor_cores_verifies(tmp_path):
    from akg_agent.translate import translate

    path = tmp_path / "bf16_gemm.py"
    path.write_text(BF16_GEMM)  # 130 rows: a partial tile at the edge
    t = translate(path, "cuda-c", "h100", tmp_path / "out.py", timing=False)
    assert t.verdict.accepted, t.verdict.line()


def _load_module(path):
    import importlib.util

    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_extension_loader_sources_compile_as_torch_builds_them(tmp_path):
    """torch's loader compiles kernels.cu with its own defines (no implicit half conversions) and the
    pybind11 launchers as C++: both must compile, here without a GPU."""
    from torch.utils import cpp_extension

    path = tmp_path / "bf16_gemm.py"
    path.write_text(BF16_GEMM)
    (tmp_path / "m.py").write_text(render(build(path, "cuda-c", "h100")))
    m = _load_module(tmp_path / "m.py")
    bind = m._akg_bindings()
    for name, n in m._AKG_KERNELS.items():
        assert f'm.def("launch_{name}", [](' + ", ".join(f"int64_t a{i}" for i in range(n)) + ")" in bind
    (tmp_path / "kernels.cu").write_text(m._AKG_SOURCE)
    (tmp_path / "bind.cpp").write_text(bind)
    flags = [f for f in m._AKG_NVCC if f not in ("-Xcompiler", "-fPIC")]
    r = subprocess.run(["nvcc", *cpp_extension.COMMON_NVCC_FLAGS, *flags, "-c", str(tmp_path / "kernels.cu"),
                        "-o", str(tmp_path / "k.o")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    import sysconfig

    incs = [f"-I{d}" for d in cpp_extension.include_paths()] + [f"-I{sysconfig.get_paths()['include']}"]
    r = subprocess.run(["g++", "-std=c++17", "-fsyntax-only", "-DTORCH_EXTENSION_NAME=akg_x", *incs,
                        str(tmp_path / "bind.cpp")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]


def test_unknown_cuda_loader_is_named(tmp_path, monkeypatch):
    (tmp_path / "m.py").write_text(render(build(problem_path("ew_activations_a"), "cuda-c", "h100")))
    m = _load_module(tmp_path / "m.py")
    monkeypatch.setenv("AKG_CUDA_LOADER", "pybind")
    with pytest.raises(RuntimeError, match="AKG_CUDA_LOADER='pybind': use torch"):
        m._akg_lib()


@pytest.mark.gpu
@pytest.mark.parametrize("loader", ["torch", "ctypes"])
def test_both_loaders_build_and_verify(tmp_path, monkeypatch, loader):
    from akg_agent.translate import translate

    monkeypatch.setenv("AKG_CUDA_LOADER", loader)  # the verifier passes it on to its sandbox
    monkeypatch.setenv("AKG_CACHE_DIR", str(tmp_path / "cache"))
    t = translate(problem_path("softmax_logsoftmax"), "cuda-c", "h100", tmp_path / "m.py", timing=False)
    assert t.verdict.accepted, t.verdict.line()
    m = _load_module(tmp_path / "m.py")
    lib = m._akg_lib()
    if loader == "torch":
        assert type(lib).__name__ == "module" and "cuda-c-ext" in lib.__file__
    else:
        import ctypes

        assert isinstance(lib, ctypes.CDLL)
    prob_path = problem_path("softmax_logsoftmax")
    from ir.problem import load_problem

    prob = load_problem(prob_path)
    ref = prob.build_model(0).cuda()
    mod = m.ModelNew(*prob.get_init_inputs()).cuda()
    mod.load_state_dict(ref.state_dict())
    xs = [x.cuda() for x in prob.make_inputs(0)]
    for got, want in zip(mod(*xs), ref(*xs)):
        torch.testing.assert_close(got, want)


def test_pointwise_kernels_use_128_bit_loads_with_a_scalar_fallback():
    t = build(problem_path("ew_activations_a"), "cuda-c", "h100")
    src = render(t)
    assert "alignas(16) float akg_x_e[4];" in src and "__ldg(reinterpret_cast<const uint4*>(x) + akg_iv * 1 + 0)" in src
    assert "reinterpret_cast<uint4*>(out)[akg_iv * 1 + 0]" in src
    assert "& 15) == 0)" in src and "} else {" in src  # unaligned views take the scalar loop


BF16_RESIDUAL = """import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x, y):
        return torch.nn.functional.gelu(x) + y.float() * 0.5


def get_inputs():
    return [torch.randn(64, 96, dtype=torch.bfloat16), torch.randn(64, 96, dtype=torch.bfloat16)]


def get_init_inputs():
    return []
"""


def test_a_16_bit_pointwise_kernel_moves_eight_elements_per_thread(tmp_path):
    """bf16 operands two bytes each: a thread loads eight of them in one 16-byte load; an fp32 operand (or
    output) of the same kernel takes two. The kernel compiles for sm_90a."""
    path = tmp_path / "bf16_residual.py"
    path.write_text(BF16_RESIDUAL)
    t = build(path, "cuda-c", "h100")
    src = render(t)
    assert "alignas(16) uint16_t akg_x_e[8];" in src and "akg_iv < 768;" in src, src[:3000]
    assert "akg_bf16_to_f32(akg_x_e[akg_e])" in src
    out = "float" if t.program.kernels()[-1].out.dtype == "f32" else "uint16_t"
    assert f"alignas(16) {out} akg_o[8];" in src
    if out == "float":
        assert "reinterpret_cast<uint4*>(out)[akg_iv * 2 + 1]" in src
    from dsl_backends import get_backend

    assert get_backend("cuda-c").compile_only(t.program, t.schedules, t.target).startswith("compiled with nvcc")


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["ew_activations_a", "bf16_residual"])
def test_vectorised_pointwise_is_right_on_unaligned_views(tmp_path, name):
    """A contiguous view can start at any element: the 16-byte path must not be taken there."""
    import importlib.util

    from akg_agent.translate import translate

    prob_path = problem_path(name) if name != "bf16_residual" else tmp_path / "bf16_residual.py"
    if name == "bf16_residual":
        prob_path.write_text(BF16_RESIDUAL)
    t = translate(prob_path, "cuda-c", "h100", tmp_path / "m.py", timing=False)
    assert t.verdict.accepted, t.verdict.line()
    spec = importlib.util.spec_from_file_location("akg_vec_mod", tmp_path / "m.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    from ir.problem import load_problem

    problem = load_problem(prob_path)
    ref = problem.build_model(0).cuda()
    new = mod.ModelNew().cuda()
    inputs = [x.cuda() for x in problem.make_inputs(0)]
    shifted = []
    for x in inputs:  # the same values, one element into a bigger buffer: not 16-byte aligned
        big = torch.empty(x.numel() + 1, dtype=x.dtype, device="cuda")
        big[1:] = x.reshape(-1)
        shifted.append(big[1:].view(x.shape))
    assert shifted[0].data_ptr() % 16 != 0
    def flat(y: object) -> tuple[torch.Tensor, ...]:
        return y if isinstance(y, tuple) else (y,)

    tol = 1e-5 if name != "bf16_residual" else 2e-2  # torch rounds gelu's bf16 output, a fused kernel does not
    for g, w, v in zip(flat(new(*shifted)), flat(ref(*inputs)), flat(new(*inputs))):
        torch.testing.assert_close(g, w, rtol=tol, atol=tol, equal_nan=True)
        torch.testing.assert_close(g, v, rtol=1e-6, atol=1e-6, equal_nan=True)  # the two paths agree
