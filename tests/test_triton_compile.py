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


def test_a_causal_bf16_attention_compiles_with_its_sweep_bounded_at_the_diagonal(tmp_path):
    """Compiled, a causal attention's key sweep ends at its row tile's diagonal (a bound that depends on the
    program id, which Triton's interpreter cannot take: it runs the guarded sweep). The guard alone kept the
    loads out of Triton's software pipeline: GPT-2's causal attention ran no faster than BERT's full one."""
    problem = tmp_path / "causal.py"
    problem.write_text(textwrap.dedent("""
        import torch
        import torch.nn as nn
        import torch.nn.functional as F


        class Model(nn.Module):
            def forward(self, q, k, v):
                return F.scaled_dot_product_attention(q, k, v, is_causal=True)


        def get_inputs():
            return [torch.randn(2, 4, 256, 64, dtype=torch.bfloat16) for _ in range(3)]


        def get_init_inputs():
            return []
    """))
    out = check(problem, "h200", tmp_path)
    assert out == "ok", out
    src = (tmp_path / "m.py").read_text()
    assert "for n0 in range(0, tl.minimum(hi, 256), BN):" in src and "if n0 < hi:" in src
    assert "BOUNDED=_AKG_COMPILED" in src
