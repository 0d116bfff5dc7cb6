"""JAX programs out: a module written for a JAX problem is a JAX function `model(params, *inputs)` (the
kernels behind a DLPack bridge), verified in the sandbox against the problem's own JAX model."""

from __future__ import annotations

from pathlib import Path

import pytest

jax = pytest.importorskip("jax")

from akg_agent.cli import main  # noqa: E402
from akg_agent.translate import translate  # noqa: E402
from akg_agent.tune import tune  # noqa: E402
from akg_agent.verifier import verify  # noqa: E402
from ir.errors import AkgError  # noqa: E402

HERE = Path(__file__).parent / "jax_problems"
PROBLEMS = sorted(p for p in HERE.glob("*.py") if not p.stem.startswith("unsupported"))


@pytest.mark.parametrize("path", PROBLEMS, ids=lambda p: p.stem)
def test_every_jax_problem_translates_to_cpp_and_verifies_against_jax(path):
    t = translate(path, "cpp", "cpu", timing=False, seeds=(0,))
    assert t.verdict.accepted and "matches the JAX reference" in t.verdict.reason, t.verdict.reason
    assert "\ndef model(params, " in t.source and "jax.dlpack.from_dlpack" in t.source


@pytest.fixture(scope="module")
def mlp(tmp_path_factory):
    d = tmp_path_factory.mktemp("jaxmod")
    t = translate(HERE / "mlp.py", "cpp", "cpu", timing=False, seeds=(0,))
    (d / "mlp_cpp.py").write_text(t.source)
    return d / "mlp_cpp.py"


def test_a_wrong_jax_module_is_rejected(mlp, tmp_path):
    src = mlp.read_text()
    (tmp_path / "off.py").write_text(src + "\n_m = model\nmodel = lambda params, x: _m(params, x) * 1.001\n")
    v = verify(HERE / "mlp.py", tmp_path / "off.py")
    assert not v.accepted and v.code == "wrong_values" and "seed 0" in v.reason
    (tmp_path / "none.py").write_text(src.replace("\ndef model(params, ", "\ndef forward_jax(params, "))
    v = verify(HERE / "mlp.py", tmp_path / "none.py")
    assert not v.accepted and v.code == "no_model"


def test_torch_compute_outside_the_kernels_is_refused(mlp, tmp_path):
    src = mlp.read_text() + '''
_m = model


def model(params, x):
    y = _m(params, x)
    return jax.dlpack.from_dlpack((torch.from_dlpack(y) * 1.0).contiguous())  # right values, torch did the work
'''
    (tmp_path / "cheat.py").write_text(src)
    v = verify(HERE / "mlp.py", tmp_path / "cheat.py")
    assert not v.accepted and v.code == "undeclared_torch" and "aten.mul" in v.reason, v.reason


def test_another_parameter_tree_is_a_clear_error(mlp):
    import importlib.util

    spec = importlib.util.spec_from_file_location("mlp_cpp_mod", mlp)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    x = jax.numpy.ones((16, 64))
    with pytest.raises(ValueError, match="this module was written for"):
        mod.model({"w": x}, x)


def test_akg_translate_writes_a_jax_module(tmp_path, capsys):
    out = tmp_path / "softmax_cpp.py"
    assert main(["translate", str(HERE / "softmax.py"), "--dsl", "cpp", "--target", "cpu", "-o", str(out)]) == 0
    assert "def model(params, " in out.read_text()


def test_tuning_a_jax_program_says_what_takes_it():
    with pytest.raises(AkgError, match="is a JAX program: akg translate writes and verifies its module"):
        tune(str(HERE / "mlp.py"), "cpu", "cpp")
