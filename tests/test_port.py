"""`akg port`: Triton modules lifted through their TTIR into graph IR, written in other DSLs and verified
against the original (run under Triton's interpreter)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ir.errors import AkgError
from ir.port import ttir

ROOT = Path(__file__).resolve().parents[1]
KERNELS = ROOT / "tests" / "port_kernels"
DATA_DEPENDENT = {"cross_entropy_rows.py", "embedding_gather.py"}  # addresses read from tensors: gathers


def test_ttir_constants_and_shapes() -> None:
    assert ttir.constant("arith.constant dense<0xFF800000> : tensor<128xf32>", "f32") == float("-inf")
    assert ttir.constant("arith.constant 100 : i32", "i32") == 100
    assert ttir.constant("arith.constant dense<true> : tensor<4xi1>", "i1") is True
    assert ttir.shape("tensor<32x16x!tt.ptr<f32>>") == (32, 16) and ttir.element("tensor<8xbf16>") == "bf16"
    assert ttir.element("!tt.ptr<f32>") == "ptr" and ttir.shape("i32") == ()


def test_ttir_parse_regions() -> None:
    text = """module {
  tt.func public @k(%x_ptr: !tt.ptr<f32> loc("x_ptr"(#loc)), %o_ptr: !tt.ptr<f32> loc("o_ptr"(#loc))) {
    %c0 = arith.constant 0 : i32 loc(#loc1)
    %acc:2 = scf.for %i = %c0 to %c0 step %c0 iter_args(%a = %c0, %b = %c0) -> (i32, i32)  : i32 {
      %s = "tt.reduce"(%a) <{axis = 0 : i32}> ({
      ^bb0(%u: f32 loc(unknown), %v: f32 loc(unknown)):
        %w = arith.addf %u, %v : f32 loc(#loc2)
        tt.reduce.return %w : f32 loc(#loc2)
      }) : (tensor<4xf32>) -> f32 loc(#loc3)
      scf.yield %a, %b : i32, i32 loc(#loc4)
    } loc(#loc5)
    tt.return loc(#loc6)
  } loc(#loc)
} loc(#loc)"""
    args, body = ttir.parse(text)
    assert args == ["x_ptr", "o_ptr"]
    loop = body[1]
    assert loop.name == "scf.for" and loop.results == ["%acc#0", "%acc#1"]
    assert loop.block_args == [["%i", "%a", "%b"]]
    red = loop.regions[0][0]
    assert red.name == "tt.reduce" and red.block_args == [["%u", "%v"]] and red.regions[0][0].name == "arith.addf"


def _lifted(files: list[Path]) -> list[dict]:
    done = subprocess.run([sys.executable, "-m", "tests.tools.port_check", *map(str, files)], cwd=ROOT,
                          env=dict(os.environ, TRITON_INTERPRET="1"), capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


@pytest.fixture(scope="session")
def every_kernel_lifted(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> dict[str, dict]:
    """Each suite kernel lifted once (one interpreter process for all), for the tests that read the lifts;
    under xdist once for all workers (the tests reading it may run on two: two minutes each)."""
    files = sorted(KERNELS.glob("*.py"))
    assert len(files) >= 16
    if worker_id == "master":
        return {r["file"]: r for r in _lifted(files)}
    from filelock import FileLock

    path = tmp_path_factory.getbasetemp().parent / "every_kernel_lifted.json"  # this run's, shared by workers
    with FileLock(f"{path}.lock"):
        if not path.is_file():
            path.write_text(json.dumps({r["file"]: r for r in _lifted(files)}))
    return json.loads(path.read_text())


@pytest.mark.slow
def test_every_suite_kernel_lifts_to_the_originals_answer(every_kernel_lifted: dict[str, dict]) -> None:
    assert len(every_kernel_lifted) == len(list(KERNELS.glob("*.py")))
    for r in every_kernel_lifted.values():
        assert r["lifted"], r
        assert r["max_err"] < 1e-4, r
        # affine addresses are views of the tensors (slices, reshapes), never gathers of constant indices
        assert ("index_select" in r["ops"]) == (r["file"] in DATA_DEPENDENT), r


def test_a_tiled_matmul_lifts_to_one_gemm(every_kernel_lifted: dict[str, dict]) -> None:
    """Every program multiplies a block of A's rows by a block of B's columns over all of K (a grouped
    order, a K loop of tl.dot) and stores the block at those rows and columns: the lift is C = A @ B, so the
    target's GEMM runs it; an epilogue (bias, leaky ReLU) is applied to the whole of C."""
    got = every_kernel_lifted
    assert got["matmul_grouped.py"]["ops"] == ["input", "matmul"], got["matmul_grouped.py"]
    assert got["matmul_grouped.py"]["max_err"] < 1e-4
    linear = got["matmul_autotune_bias.py"]
    assert "matmul" in linear["ops"] and "sum" not in linear["ops"] and linear["max_err"] < 1e-4, linear


def _port(name: str, dsl: str, target: str, tmp_path: Path) -> str:
    out = tmp_path / f"{Path(name).stem}_{dsl}.py"
    done = subprocess.run([sys.executable, "-m", "akg_agent", "port", str(KERNELS / name), "--dsl", dsl,
                           "--target", target, "-o", str(out), "--no-time"], cwd=ROOT, capture_output=True,
                          text=True, timeout=900, env={k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"})
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert out.is_file() and (tmp_path / f"{out.stem}_original.py").is_file()
    return done.stdout


@pytest.mark.slow
@pytest.mark.parametrize("name", ["vector_add.py", "fused_softmax.py", "matmul_grouped.py", "layer_norm.py",
                                  "attention_online.py"])
def test_port_to_cpp_verified_against_the_original(name: str, tmp_path: Path) -> None:
    out = _port(name, "cpp", "cpu", tmp_path)
    assert "lifted" in out and "verified against the original: accepted" in out, out


@pytest.mark.slow
@pytest.mark.parametrize("name", ["fused_softmax.py", "matmul_grouped.py", "dropout_seeded.py"])
def test_port_to_pallas_tpu_verified_against_the_original(name: str, tmp_path: Path) -> None:
    out = _port(name, "pallas", "tpu-v5p", tmp_path)
    assert "verified against the original: accepted" in out, out


def test_port_to_cuda_c_compiles(tmp_path: Path) -> None:
    out = _port("fused_softmax.py", "cuda-c", "h200", tmp_path)
    assert "compiled with nvcc" in out, out


def test_a_wrong_lift_is_rejected_naming_the_output(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A lifter that drops a load's mask (padding read as 0 instead of -inf) writes a wrong softmax: the
    verifier, which runs the original, rejects the port."""
    from akg_agent.port import port
    from ir.port import views

    real = views.gather
    monkeypatch.setattr(views, "gather", lambda cx, src, off, mask, fill, what: real(cx, src, off, mask, 0.0, what))
    monkeypatch.setattr(views, "gather_lazy", lambda cx, src, off, mask, fill, what: (
        real(cx, src, off, mask, 0.0, what), None))
    with pytest.raises(AkgError, match="failed verification: .*output"):
        port(KERNELS / "fused_softmax.py", "cpp", "cpu", tmp_path / "wrong.py", timing=False)
    assert not (tmp_path / "wrong.py").exists()


def test_port_errors_name_the_cause(tmp_path: Path) -> None:
    from akg_agent.port import port

    cuda = tmp_path / "cuda_mod.py"
    cuda.write_text("import torch\nfrom torch.utils.cpp_extension import load_inline\n"
                    "class ModelNew(torch.nn.Module):\n    pass\n")
    with pytest.raises(AkgError, match="launches no Triton kernel: lifting CUDA-C"):
        port(cuda, "cpp", "cpu", tmp_path / "o.py")
    none = tmp_path / "none.py"
    none.write_text("import triton\nclass Model:\n    pass\n")
    with pytest.raises(AkgError, match="defines no ModelNew"):
        port(none, "cpp", "cpu", tmp_path / "o.py")
    with pytest.raises(AkgError, match=r"cannot lift Triton kernel block_max_kernel \(atomic_max.py:.*not lifted yet"):
        port(_atomic_max(tmp_path), "cpp", "cpu", tmp_path / "o.py", timing=False)


@pytest.mark.slow
def test_triton_in_pallas_tpu_and_its_tests_out(tmp_path: Path) -> None:
    """docs/using.md's walk-through: a Triton module ported to Pallas for TPU, its tests generated; they
    pass on the port and fail on a copy whose answer is nudged."""
    _port("fused_softmax.py", "pallas", "tpu-v5p", tmp_path)
    module, ref = tmp_path / "fused_softmax_pallas.py", tmp_path / "fused_softmax_pallas_original.py"
    nudged = tmp_path / "off" / "module.py"
    nudged.parent.mkdir()
    head, tail = module.read_text().rsplit("        return ", 1)  # forward's last line
    nudged.write_text(head + "        return 1.001 * " + tail)
    assert nudged.read_text() != module.read_text()
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    run = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist"]
    for mod, sub, want in ((module, "good", 0), (nudged, "bad", 1)):
        test = tmp_path / sub / "test_softmax_tpu.py"
        gen = subprocess.run([sys.executable, "-m", "akg_agent", "testgen", str(ref), str(mod), "-o", str(test)],
                             cwd=ROOT, capture_output=True, text=True, env=env, timeout=300)
        assert gen.returncode == 0, gen.stderr[-2000:]
        stop = ["-x"] if want else []  # the nudged copy: its first failure is the answer
        done = subprocess.run([*run, *stop, str(test)], capture_output=True, text=True, cwd=tmp_path, env=env,
                              timeout=600)
        assert done.returncode == want, done.stdout[-2000:]
    assert "test_matches_the_reference[" in done.stdout


ATOMIC_MAX = '''import torch
import triton
import triton.language as tl


@triton.jit
def block_max_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=-float("inf"))
    tl.atomic_max(out_ptr, tl.max(x, axis=0){bug})


class ModelNew(torch.nn.Module):
    def forward(self, x):
        out = torch.full((1,), -float("inf"), device=x.device)
        block_max_kernel[(triton.cdiv(x.numel(), 256),)](x, out, x.numel(), BLOCK=256)
        return out


def get_inputs():
    return [torch.randn(3000)]


def get_init_inputs():
    return []
'''


def _atomic_max(tmp_path: Path) -> Path:
    """A module whose kernel akg does not lift (an atomic maximum)."""
    path = tmp_path / "atomic_max.py"
    path.write_text(ATOMIC_MAX.replace("{bug}", ""))
    return path


def test_what_cannot_be_lifted_is_written_by_a_model_and_verified(tmp_path: Path) -> None:
    """The LLM path with a scripted model: a kernel akg cannot lift (an atomic max) is written by the model; its
    first answer is rejected against the original and goes back with the verifier's reason."""
    from akg_agent.agents.scripted import ScriptedModel
    from akg_agent.port import port

    reply = "Here is the port.\n```python\n" + ATOMIC_MAX.split("def get_inputs")[0] + "```\n"
    model = ScriptedModel([reply.replace("{bug}", " + 1.0"), reply.replace("{bug}", "")])
    p = port(_atomic_max(tmp_path), "triton", "h200", tmp_path / "out.py", timing=False, model=model)
    assert p.translation is None and p.rewritten is not None and p.rewritten.verdict.accepted
    assert len(p.rewritten.attempts) == 2 and "rejected" in p.rewritten.attempts[0]
    first, second = model.prompts
    assert "tl.atomic_max" in first[1][0]["content"] and "not lifted yet" in first[1][0]["content"]
    assert "The verifier rejected it" in second[1][-1]["content"]
    assert (tmp_path / "out.py").read_text().startswith("# Written by scripted:test for akg port from atomic_max.py")


PALLAS = KERNELS / "pallas"


def test_pallas_calls_lift_to_the_kernels_answer() -> None:
    """A JAX program whose kernels are pallas_calls: each lifted through its jaxpr (references discharged,
    vectorised over the grid), blocks read as views; the graph gives the Pallas program's answer."""
    import numpy as np
    import torch

    from ir.evaluate import run
    from ir.jax_lift import lift_jax, load_jax_problem

    for path in sorted(PALLAS.glob("*.py")):
        p = load_jax_problem(path)
        g = lift_jax(p)
        assert [k["kernel"] for k in g.meta["ported"]] == ["pallas_call"], path.name
        assert "index_select" not in {n.op for n in g.nodes}, path.name  # blocks are views
        params, xs = p.make(0)
        want = np.asarray(p.model(params, *xs))
        got = run(g, [torch.from_numpy(np.array(x)) for x in xs])[0]
        assert np.abs(got.numpy() - want).max() < 1e-4, path.name


@pytest.mark.slow
@pytest.mark.parametrize("name,dsl,target", [("matmul_blocks.py", "cpp", "cpu"),
                                             ("scaled_add_pid.py", "triton", "h200"),
                                             ("softmax_rows.py", "cuda-c", "h200")])
def test_pallas_module_ported(name: str, dsl: str, target: str, tmp_path: Path) -> None:
    from akg_agent.port import port

    p = port(PALLAS / name, dsl, target, tmp_path / "out.py", timing=False)
    t = p.translation
    assert t is not None and p.kernels and p.kernels[0]["kernel"] == "pallas_call"
    if t.executor == "compile-only":
        assert "compiled with nvcc" in t.compiled
    else:
        assert t.verdict is not None and t.verdict.accepted, t.verdict


@pytest.mark.gpu
def test_a_cuda_c_module_ported_to_triton_by_a_recorded_model_is_verified_on_the_gpu(tmp_path: Path) -> None:
    """The LLM path end to end on the device: a CUDA-C module (load_inline) that akg cannot lift is written
    in Triton by the model of a recorded transcript, and the port is verified against the original run as
    written on the GPU."""
    from akg_agent.cli import main

    cuda = KERNELS / "cuda"
    out = tmp_path / "row_softmax_triton.py"
    assert main(["port", str(cuda / "row_softmax_cuda.py"), "--dsl", "triton", "--target", "h200", "-o", str(out),
                 "--no-time", "--llm", f"replay:{cuda / 'row_softmax_triton.json'}"]) == 0
    text = out.read_text()
    head = text.splitlines()[0]
    assert head.startswith("# Written by") and "from row_softmax_cuda.py; verified against it: accepted" in head
    assert "@triton.jit" in text, text[:500]
