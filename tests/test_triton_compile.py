"""Written Triton kernels compiled for sm_90 on this CPU machine, as the GPU compiles them on first use:
what only Triton's interpreter accepts (a block stored through a scalar pointer) fails here, not on the
device."""

from __future__ import annotations

import textwrap

import pytest

from tests.tools.triton_sm90_sweep import check


@pytest.mark.parametrize("reduce", ["mean", "sum"])
def test_a_loss_reduced_to_one_value_compiles_for_the_gpu(reduce, tmp_path):
    """Label-smoothed cross-entropy at a vocabulary's size: its last kernel sums the rows' losses into one
    value, stored from a [BM, 1] block (it went through a scalar pointer: Triton's interpreter accepted
    it, the H200's compiler said "Value argument cannot be block type if pointer argument is not a block")."""
    problem = tmp_path / "ce.py"
    problem.write_text(textwrap.dedent(f"""
        import torch
        import torch.nn as nn
        import torch.nn.functional as F


        class Model(nn.Module):
            def forward(self, x, t):
                return F.cross_entropy(x, t, label_smoothing=0.1, reduction="{reduce}")


        def get_inputs():
            return [torch.randn(4096, 32000), torch.randint(0, 32000, (4096,))]


        def get_init_inputs():
            return []
    """))
    out = check(problem, "h100", tmp_path)
    assert out == "ok", out
