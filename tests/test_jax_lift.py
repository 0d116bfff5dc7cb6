"""JAX programs in: each problem under tests/jax_problems lifts from its jaxpr into the graph IR, and the
IR interpreter (each op's one definition) reproduces JAX's own outputs at two input seeds."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

jax = pytest.importorskip("jax")

from ir import run  # noqa: E402
from ir.errors import AkgError  # noqa: E402
from ir.jax_lift import is_jax_problem, lift_jax, load_jax_problem  # noqa: E402
from ir.jax_prims import to_torch  # noqa: E402

HERE = Path(__file__).parent / "jax_problems"
PROBLEMS = sorted(p for p in HERE.glob("*.py") if not p.stem.startswith("unsupported"))


def _outputs(x):
    return list(x) if isinstance(x, (tuple, list)) else [x]


def test_the_suite_has_fifteen_jax_problems():
    assert len(PROBLEMS) >= 15
    assert all(is_jax_problem(p) for p in PROBLEMS)
    assert not is_jax_problem(Path(__file__).parent / "problems" / "softmax_logsoftmax.py")


@pytest.mark.parametrize("path", PROBLEMS, ids=lambda p: p.stem)
def test_a_jax_program_lifts_and_the_interpreter_matches_jax(path):
    p = load_jax_problem(path)
    g = lift_jax(p)
    params = p.make(0)[0]
    for seed in (0, 1):
        inputs = list(p.get_inputs(jax.random.key(seed)))
        want = _outputs(p.model(params, *inputs))
        got = run(g, [to_torch(x) for x in inputs])
        assert len(got) == len(want)
        for a, b in zip(got, want):
            b = to_torch(b)
            assert a.shape == b.shape and a.dtype == b.dtype
            torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


def test_parameters_are_weights_named_by_their_pytree_path():
    g = lift_jax(load_jax_problem(HERE / "transformer_mlp_block.py"))
    assert set(g.weights) == {"ln.g", "ln.b", "fc1.w", "fc1.b", "fc2.w", "fc2.b"}
    assert [n.name for n in g.inputs] == ["x"]
    np.testing.assert_array_equal(g.weights["ln.g"].numpy(), np.ones(32, np.float32))


def test_an_unsupported_primitive_is_one_line_naming_it_and_the_users_line():
    with pytest.raises(AkgError) as e:
        lift_jax(load_jax_problem(HERE / "unsupported_sort.py"))
    msg = str(e.value)
    assert "\n" not in msg
    assert "`sort`" in msg and "unsupported_sort.py:7" in msg and "jnp.sort(x, axis=-1)" in msg


def test_a_file_missing_the_convention_says_what_it_needs(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import jax\n\ndef model(params, x):\n    return x\n")
    with pytest.raises(AkgError, match="defines no get_params, get_inputs"):
        load_jax_problem(bad)


def test_akg_ir_prints_a_jax_programs_graph_and_its_kernel_groups(capsys):
    from akg_agent.cli import main

    assert main(["ir", str(HERE / "mlp.py"), "--passes", "simplify,decompose,simplify,fuse"]) == 0
    out = capsys.readouterr().out
    assert "%w1: f32[64,128] = param() {key=\"w1\"}" in out
    assert "group 0 [contraction] anchor %matmul: matmul, reshape, add, maximum -> %maximum" in out


def test_a_jax_program_given_to_a_pytorch_only_command_says_what_takes_it():
    from ir.problem import load_problem

    with pytest.raises(AkgError, match=r"mlp.py is a JAX program .*translate and verify take it; tune and bench"):
        load_problem(HERE / "mlp.py")
