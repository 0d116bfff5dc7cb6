"""Pallas for TPU targets (dsl_backends/pallas/tpu.py): every suite problem and every JAX problem is
written the TPU way (BlockSpec grids, VMEM blocks under the (8, 128) rule, the MXU for contractions),
lowered for the TPU by Mosaic here (no TPU needed) and verified in TPU interpret mode."""

from __future__ import annotations

from pathlib import Path

import pytest

jax = pytest.importorskip("jax")

from akg_agent.translate import build, render, translate  # noqa: E402
from akg_agent.verifier import verify  # noqa: E402

from .conftest import FULL_CONFORMANCE, PROBLEMS, ROOT, problem_path  # noqa: E402

# every fourth suite problem in `make test`, odd ones (test_conformance.py runs the even ones through Pallas's
# GPU-style interpreter); AKG_FULL_CONFORMANCE=1 all of them
SUITE = [p.stem for i, p in enumerate(PROBLEMS) if FULL_CONFORMANCE or i % 4 == 1]
# every other JAX problem in `make test` (test_jax_translate.py runs them all in C++); all with AKG_FULL_CONFORMANCE=1
JAX = [p for i, p in enumerate(sorted(p for p in (ROOT / "tests" / "jax_problems").glob("*.py")
                                      if not p.stem.startswith("unsupported"))) if FULL_CONFORMANCE or i % 2 == 0]
HOW = "measured: not timed (no tpu-v5p here: lowered for TPU, run in TPU interpret mode)"


@pytest.mark.parametrize("name", SUITE)
def test_every_suite_problem_lowers_for_tpu_and_verifies_in_tpu_interpret_mode(name):
    t = translate(problem_path(name), "pallas", "tpu-v5p", timing=False, seeds=(0, 1))
    assert t.verdict.accepted, t.verdict.reason
    assert HOW in t.source
    if t.program.kernels():
        assert "_akg_tpu_launch(" in t.source and "pl.BlockSpec(" in t.source and "plt.load(ref.at" not in \
            t.source.split("def _akg_tpu_params")[1]


@pytest.mark.parametrize("path", JAX, ids=lambda p: p.stem)
def test_every_jax_problem_translates_to_pallas_tpu_and_verifies_against_jax(path):
    t = translate(path, "pallas", "tpu-v5p", timing=False, seeds=(0,))
    assert t.verdict.accepted and "matches the JAX reference" in t.verdict.reason, t.verdict.reason
    assert "\ndef model(params, " in t.source and HOW in t.source


def _verify_with(t, tmp_path: Path, **sched):
    (k,) = [k for k in t.program.kernels()]
    t.schedules = {k.name: t.schedules[k.name].replace(**sched)}
    f = tmp_path / "cand.py"
    f.write_text(render(t))
    return verify(t.problem, f, target="tpu-v5p", seeds=(0,)), f.read_text()


def _problem(tmp_path: Path, body: str, inputs: str) -> Path:
    f = tmp_path / "prob.py"
    f.write_text(f"import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n    def forward(self, x, w):\n"
                 f"        return {body}\n\n\ndef get_inputs():\n    return [{inputs}]\n\n\n"
                 "def get_init_inputs():\n    return []\n")
    return f


def test_a_block_that_breaks_the_tiling_rule_is_rejected_with_mosaics_reason(tmp_path):
    t = build(_problem(tmp_path, "torch.relu(x) * w", "torch.randn(32, 256), torch.randn(32, 256)"), "pallas",
              "tpu-v5p")
    v, _ = _verify_with(t, tmp_path, T0=8)
    assert v.accepted, v.reason
    v, _ = _verify_with(t, tmp_path, T0=4)  # 4 rows: a block's second-to-last dimension must be a multiple of 8
    assert not v.accepted and "Pallas TPU lowering failed" in v.reason and "8" in v.reason, v.reason


def test_a_contraction_runs_on_the_mxu_over_k_blocks_with_a_masked_tail(tmp_path):
    """K = 300 in blocks of 128: three steps of the 'arbitrary' grid axis into a VMEM accumulator, the
    last block's 84 padded columns masked out of the sum."""
    t = build(_problem(tmp_path, "torch.tanh(x @ w) + 1.0", "torch.randn(64, 300), torch.randn(300, 256)"),
              "pallas", "tpu-v5p")
    v, src = _verify_with(t, tmp_path, TM=32, TN=128, TK=128)
    assert v.accepted, v.reason
    assert "lax.dot_general(" in src and "pltpu.VMEM((32, 128), jnp.float32)" in src and "'arbitrary'" in src
    assert "grid=(1, 2, 2, 3)" in src and "kk * 128 < 300" in src


def test_the_lowered_kernel_is_a_mosaic_call(tmp_path):
    import importlib.util

    t = translate(problem_path("softmax_logsoftmax"), "pallas", "tpu-v5p", timing=False, seeds=(0,))
    f = tmp_path / "m.py"
    f.write_text(t.source)
    spec = importlib.util.spec_from_file_location("akg_tpu_m", f)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    k = t.program.kernels()[0]
    args = [jax.ShapeDtypeStruct((b.numel,), "float32") for b in k.inputs()]
    import functools

    exp = jax.export.export(jax.jit(functools.partial(getattr(mod, k.name), interpret=False)),
                            platforms=["tpu"])(*args)
    assert "tpu_custom_call" in exp.mlir_module()


def test_a_group_norm_fits_vmem_by_its_values_not_the_product_of_its_axes(tmp_path):
    """Group norm + swish + max pool at 2 x 32 x 32 x 32, 8 groups (a new user's program): the variance
    around the mean nests one reduction of 4096 values in another, and the TPU template's footprint was
    the product of both (5 GB a block row); a value holds its own axes, so it fits and is written."""
    problem = tmp_path / "gn.py"
    problem.write_text('''import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.gn = nn.GroupNorm(8, 32)

    def forward(self, x):
        y = self.gn(x)
        return F.max_pool2d(y * torch.sigmoid(y), 2)


def get_inputs():
    return [torch.randn(2, 32, 32, 32)]


def get_init_inputs():
    return []
''')
    t = translate(problem, "pallas", "tpu-v5p", timing=False, seeds=(0, 1))
    assert t.verdict is not None and t.verdict.accepted, t.verdict
