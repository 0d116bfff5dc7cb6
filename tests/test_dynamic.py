"""--dynamic: run-time sizes from lifting to the written module, checked at several sizes."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch

from akg_agent.translate import build, render, translate
from akg_agent.verifier.sizes import dynamic_sizes, sized_inputs
from ir.errors import AkgError
from ir.lift import lift
from ir.problem import load_problem
from ir.sym import DynamicDecision, c_syntax, symbol

PROBLEMS = Path(__file__).parent / "problems"

# one of each kind the issue names: pointwise, reduction, softmax and norms, GEMM, attention, pooling,
# losses, scans and fused level-2 chains
KINDS = ["ew_activations_a", "red_sum_mean", "red_var_std", "softmax_logsoftmax", "norm_layer_rms",
         "norm_instance_group", "mm_batched", "l2_gemm_gelu_softmax_layernorm", "attention_sdpa", "pool_adaptive",
         "loss_kl_div", "scan_cumsum_cumprod", "l2_conv_relu_biasadd", "l2_gemm_scale_sigmoid_sum"]


def test_sizes_render_as_expressions_and_decide_at_the_traced_size():
    b = symbol("batch", 24)
    n = b * 4096
    assert int(n) == 98304 and str(n) == "(4096 * akg_n_batch)"
    grid = (n + 1023) // 1024
    assert int(grid) == 96 and str(grid) == "((1023 + 4096 * akg_n_batch) // 1024)"
    with c_syntax():
        assert str(grid) == "((1023 + 4096 * akg_n_batch) / 1024)"
        assert str(-((-b) // 8)) == "((7 + akg_n_batch) / 8)"  # ceil-division stays exact under C's `/`
    assert (n % 16) == 0 and b * 2 == 2 * b and f"{b + 1}" == "(1 + akg_n_batch)"
    assert b <= 24 and b > 1  # monotone questions hold for every size of the envelope below
    with pytest.raises(DynamicDecision):
        bool(b % 8 == 0)  # a multiple of 8 at 24, not at 17: no single answer


def test_lift_keeps_run_time_sizes_through_inference():
    g = lift(load_problem(PROBLEMS / "l2_gemm_gelu_softmax_layernorm.py"), dynamic="batch<=24")
    assert g.meta["dynamic"] == {"batch": {"traced": 24, "dims": [(0, 0)]}}
    assert all(str(n.shape[0]) == "akg_n_batch" for n in g.nodes if n.op not in ("param", "scalar"))


@pytest.mark.parametrize("spec, words", [
    ("batch<=2", "bound 2 is below"),
    ("nosuch:0", "forward has no input 'nosuch'"),
    ("x:7", "has no dimension 7"),
    ("x:0;y", "cannot read"),
    ("auto<=8", "auto takes no bound"),
])
def test_bad_specs_are_one_line_errors(spec, words):
    with pytest.raises(AkgError, match=words):
        lift(load_problem(PROBLEMS / "ew_activations_a.py"), dynamic=spec)


def test_a_program_that_fixes_the_size_says_so():
    with pytest.raises(AkgError, match="fixes a size named there.*leave that dimension static"):
        lift(load_problem(PROBLEMS / "mm_square.py"), dynamic="batch")  # A @ B: B's rows are A's columns


def test_a_slice_that_needs_a_minimum_size_is_refused():
    with pytest.raises(DynamicDecision, match="slice at -3"):
        lift(load_problem(PROBLEMS / "mv_slice_select.py"), dynamic="batch")


def test_backends_without_run_time_sizes_refuse_clearly():
    # the out-of-tree example backend (tests/backend_example) does not declare `dynamic` in its manifest
    with pytest.raises(AkgError, match="numpy backend does not take run-time sizes yet.*cpp, cuda-c, metal, pallas"):
        build(PROBLEMS / "ew_activations_a.py", "numpy", "cpu", dynamic="batch")


def test_sized_inputs_grow_with_fresh_values_and_cut():
    p = load_problem(PROBLEMS / "loss_kl_div.py")
    dyn = {"batch": {"traced": 40, "dims": [(0, 0), (1, 0)]}}
    assert dynamic_sizes(dyn) == [1, 3, 17, 39, 40]
    big = sized_inputs(p.make_inputs, 0, dyn, 40)
    assert [tuple(x.shape) for x in big] == [(40, 32), (40, 32)]
    assert not torch.equal(big[0][:16], big[0][16:32])  # another seed's rows, not a repeat
    assert torch.equal(sized_inputs(p.make_inputs, 0, dyn, 3)[0], p.make_inputs(0)[0][:3])


@pytest.mark.parametrize("dsl, target", [("cpp", "cpu"), ("triton", "h100")])
@pytest.mark.parametrize("name", KINDS)
def test_dynamic_batch_verifies_at_1_3_17_and_the_bound(name, dsl, target, tmp_path):
    t = translate(PROBLEMS / f"{name}.py", dsl, target, out=tmp_path / "m.py", timing=False,
                  dynamic="batch<=24", seeds=(0,))
    assert t.verdict is not None and t.verdict.accepted, t.verdict
    checked = {r["trial"] for r in t.verdict.details["trials"]}
    assert {"batch=1", "batch=3", "batch=17", "batch=23", "batch=24"} <= checked
    assert "sizes: batch from 1 to 24 at run time" in t.source


# the other DSLs where an executor runs them here: Metal's emulator, Pallas' interpreter, TileLang's C
# target (CUDA-C is compiled only, without a GPU)
@pytest.mark.parametrize("name, dsl, target", [
    ("red_sum_mean", "metal", "m4-max"), ("l2_gemm_gelu_softmax_layernorm", "metal", "m4-max"),
    ("red_sum_mean", "pallas", "h100"), ("l2_gemm_gelu_softmax_layernorm", "pallas", "h100"),
    ("red_sum_mean", "tilelang", "h100"),  # one: TileLang's C target compiles once per size (slow here)
])
def test_dynamic_batch_in_the_other_dsls(name, dsl, target, tmp_path):
    t = translate(PROBLEMS / f"{name}.py", dsl, target, out=tmp_path / "m.py", timing=False,
                  dynamic="batch<=24", seeds=(0,))
    assert t.verdict is not None and t.verdict.accepted, t.verdict
    assert {"batch=1", "batch=17", "batch=24"} <= {r["trial"] for r in t.verdict.details["trials"]}


def test_cuda_c_kernels_take_sizes_and_compile(tmp_path):
    t = translate(PROBLEMS / "l2_gemm_gelu_softmax_layernorm.py", "cuda-c", "h100", out=tmp_path / "m.py",
                  timing=False, dynamic="batch<=24")
    assert "compiled with nvcc" in " ".join(t.notes)
    assert "const int64_t akg_n_batch = (int64_t)(intptr_t)z0;" in t.source


def _load(path: Path):
    spec = importlib.util.spec_from_file_location(f"akg_dyn_{path.stem}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_written_module_follows_the_size_and_guards_its_envelope(tmp_path):
    path = PROBLEMS / "loss_mse_huber_l1.py"
    t = build(path, "cpp", "cpu", dynamic="batch<=24")
    out = tmp_path / "m.py"
    out.write_text(render(t))
    mod = _load(out)
    p = load_problem(path)
    ref, cand = p.build_model(0).eval(), mod.ModelNew()
    for n in (1, 5, 24):
        xs = [torch.randn(n, *x.shape[1:]) for x in p.make_inputs(0)]
        for a, b in zip(cand(*xs), ref(*xs)):
            torch.testing.assert_close(a, b, atol=1e-4, rtol=1e-4)
    x, y = p.make_inputs(0)
    with pytest.raises(ValueError, match=r"expected float32 \[batch<=24, .*got float32 \[25"):
        cand(torch.randn(25, *x.shape[1:]), torch.randn(25, *y.shape[1:]))
    with pytest.raises(ValueError, match="the same in every input"):  # one size, two values
        cand(torch.randn(3, *x.shape[1:]), torch.randn(4, *y.shape[1:]))


@pytest.mark.gpu
@pytest.mark.parametrize("dsl", ["triton", "cuda-c", "tilelang", "pallas"])
@pytest.mark.parametrize("name", ["ew_activations_a", "red_sum_mean", "l2_gemm_gelu_softmax_layernorm",
                                  "attention_sdpa"])
def test_dynamic_batch_on_the_gpu(name, dsl, tmp_path):
    t = translate(PROBLEMS / f"{name}.py", dsl, "h100", out=tmp_path / "m.py", timing=False,
                  dynamic="batch<=64", seeds=(0,))
    assert t.verdict is not None and t.verdict.accepted, t.verdict
    assert t.verdict.details["device"] == "cuda"
    checked = {r["trial"] for r in t.verdict.details["trials"]}
    assert {"batch=1", "batch=3", "batch=17", "batch=63", "batch=64"} <= checked


def test_schedules_per_size_bucket_dispatch_and_verify(tmp_path):
    """A size bound far above the smallest sizes gets kernels scheduled for each bucket (here Triton's
    interpreter blocks follow the size); the module dispatches on the size and every bucket's edges are
    checked."""
    t = translate(PROBLEMS / "l2_gemm_scale_sigmoid_sum.py", "triton", "h100", out=tmp_path / "m.py",
                  timing=False, dynamic="batch<=4096", seeds=(0,))
    assert t.verdict is not None and t.verdict.accepted, t.verdict
    uppers = [u for u, _, _ in t.buckets]
    assert uppers and uppers == sorted(uppers) and uppers[-1] < 4096
    checked = {r["trial"] for r in t.verdict.details["trials"]}
    assert {f"batch={u}" for u in uppers} | {f"batch={u + 1}" for u in uppers} <= checked
    for u in uppers:
        assert f"if akg_n_batch <= {u}:" in t.source
    names = {k.name for _, p, _ in t.buckets for k in p.kernels()} | {k.name for k in t.program.kernels()}
    assert len(names) == sum(len(p.kernels()) for _, p, _ in t.buckets) + len(t.program.kernels())  # apart


def test_tune_a_dynamic_module_times_it_at_the_bound(tmp_path, monkeypatch):
    from akg_agent.tune import tune
    from akg_agent.tuning_db import TuningDB

    monkeypatch.setenv("AKG_CACHE_DIR", str(tmp_path / "cache"))
    out = tmp_path / "tuned.py"
    r = tune(str(PROBLEMS / "l2_gemm_scale_sigmoid_sum.py"), "cpu", "cpp", budget=2, out=out,
             db=TuningDB(tmp_path / "tuning.sqlite"), strategies=False, dynamic="batch<=48")
    assert r["verdict"].startswith("accepted") and r["measured"] >= 2
    text = out.read_text()
    assert "measured at batch=48:" in text and "AKG_DYNAMIC = {'batch': {'traced': 48" in text


SE = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        s = torch.sigmoid(self.fc(x.mean((2, 3))))
        return x * s[:, :, None, None]


def get_inputs():
    return [torch.randn(3, 8, 5, 5)]


def get_init_inputs():
    return []
'''


def test_a_gemm_whose_reshaped_epilogue_hides_its_columns_is_a_one_line_error(tmp_path):
    """A linear whose epilogue reshapes it to (batch, C, 1, 1), over a run-time batch: the C++ blocked
    GEMM cannot tell its columns from its rows; the error names the way out, which works."""
    path = tmp_path / "se.py"
    path.write_text(SE)
    with pytest.raises(AkgError, match=r"cannot express a kernel of se\.py: .*--library gemm"):
        render(build(path, "cpp", "cpu", tuned=False, dynamic="batch"))
    assert "F.linear" in render(build(path, "cpp", "cpu", tuned=False, dynamic="batch", library=("gemm",)))


BLOCK = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.qkv, self.proj = nn.Linear(256, 768), nn.Linear(256, 256)

    def forward(self, x):
        b, t, _ = x.shape
        q, k, v = (z.view(b, t, 4, 64).transpose(1, 2) for z in self.qkv(x).split(256, -1))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(a.transpose(1, 2).reshape(b, t, 256))


def get_inputs():
    return [torch.randn(4, 96, 256)]


def get_init_inputs():
    return []
'''


def test_an_attention_under_run_time_sizes_stays_one_library_call(tmp_path):
    """With its GEMMs in the library, an attention the plan cannot make one kernel (the template takes fixed
    sizes: --dynamic) is torch's one call: it was split into two library GEMMs around a stored score tensor
    and a generated softmax (a new user's tiny LM at its second batch size ran 0.65x eager on the CPU)."""
    path = tmp_path / "block.py"
    path.write_text(BLOCK)
    t = translate(path, "cpp", "cpu", out=tmp_path / "m.py", timing=False, dynamic="batch<=8", seeds=(0,))
    assert t.verdict is not None and t.verdict.accepted, t.verdict
    assert "attention" in t.strategy.library and "gemm" in t.strategy.library, t.strategy
    assert not [k for k in t.program.kernels() if k.kind in ("rownorm", "attention")], t.program.kernels()
    assert "scaled_dot_product_attention" in t.source
