"""`akg ir` end to end, and the one-line errors for bad input."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from akg_agent.cli import main
from ir.lift import lift
from ir.problem import load_problem

from .conftest import KERNELBENCH, ROOT, problem_path
from .helpers import assert_matches_module


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def write(tmp_path: Path, body: str, name: str = "prob.py") -> Path:
    p = tmp_path / name
    p.write_text(textwrap.dedent(body))
    return p


GOOD_TAIL = """
def get_inputs():
    return [torch.randn(4, 8)]


def get_init_inputs():
    return []
"""


def test_text_output_and_trace(capsys):
    code, out, _ = run_cli(capsys, "ir", str(problem_path("rule_sum_through_linear")), "--passes", "simplify,fuse",
                           "--trace")
    assert code == 0
    assert out.startswith("graph Model {")
    assert "// kernel groups" in out and "// trace" in out and "reduce-through-linear" in out


def test_json_output(capsys):
    code, out, _ = run_cli(capsys, "ir", str(problem_path("l2_gemm_scale_sigmoid_sum")), "--passes", "fuse",
                           "--format", "json")
    doc = json.loads(out)
    assert code == 0 and doc["graph"].startswith("graph Model")
    assert [grp["kind"] for grp in doc["fusion"]["groups"]] == ["contraction", "reduction"]
    assert doc["fusion"]["boundaries"][0]["reason"].startswith("one anchor per kernel")


def test_dot_output(capsys):
    code, out, _ = run_cli(capsys, "ir", str(problem_path("mm_square")), "--passes", "fuse", "--format", "dot")
    assert code == 0 and out.startswith('digraph "Model"') and "cluster_0" in out


def test_module_entry_point_runs_the_embedded_default():
    r = subprocess.run([sys.executable, "-m", "akg_agent", "ir", "--passes", "simplify,fuse"], cwd=ROOT,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "reduce-through-linear" not in r.stdout  # no --trace
    assert "group 0 [contraction]" in r.stdout


def _one_line_error(capsys, *argv: str) -> str:
    code, out, err = run_cli(capsys, *argv)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("akg: error: ")
    return lines[0]


def test_missing_file(capsys, tmp_path):
    assert "no such problem file" in _one_line_error(capsys, "ir", str(tmp_path / "nope.py"))


def test_file_without_model(capsys, tmp_path):
    p = write(tmp_path, "import torch\n" + GOOD_TAIL)
    assert "defines no Model" in _one_line_error(capsys, "ir", str(p))


def test_syntax_error_names_the_line(capsys, tmp_path):
    p = write(tmp_path, "import torch\nclass Model(:\n    pass\n")
    msg = _one_line_error(capsys, "ir", str(p))
    assert f"{p}:2: syntax error" in msg


def test_get_inputs_that_raises(capsys, tmp_path):
    p = write(tmp_path, """
        import torch
        class Model(torch.nn.Module):
            def forward(self, x):
                return x
        def get_inputs():
            raise ValueError("no data here")
        def get_init_inputs():
            return []
    """)
    msg = _one_line_error(capsys, "ir", str(p))
    assert "get_inputs() in" in msg and "ValueError: no data here" in msg and "prob.py:7" in msg


UNSUPPORTED = """
import torch


class Model(torch.nn.Module):
    def forward(self, x):
        y = torch.relu(x)
        return torch.atan(y) + 1.0
""" + GOOD_TAIL


def test_unsupported_op_names_op_and_line(capsys, tmp_path):
    p = write(tmp_path, UNSUPPORTED)
    msg = _one_line_error(capsys, "ir", str(p))
    assert "unsupported op aten.atan.default at prob.py:8" in msg and "--allow-opaque" in msg


def test_allow_opaque_keeps_the_op_in_torch(capsys, tmp_path):
    p = write(tmp_path, UNSUPPORTED)
    code, out, err = run_cli(capsys, "ir", str(p), "--allow-opaque")
    assert code == 0 and "opaque(" in out and 'target="aten.atan.default"' in out
    assert "opaque (left in torch): aten.atan.default at prob.py:8" in err
    problem = load_problem(p)
    assert_matches_module(problem, lift(problem, allow_opaque=True))


def test_forward_that_fails_to_trace(capsys, tmp_path):
    p = write(tmp_path, textwrap.dedent("""
        import torch
        class Model(torch.nn.Module):
            def forward(self, x):
                return x @ x
    """) + GOOD_TAIL)
    assert "torch.export could not trace prob.py" in _one_line_error(capsys, "ir", str(p))


def test_unknown_pass(capsys):
    assert "unknown pass 'nope'" in _one_line_error(capsys, "ir", str(problem_path("mm_square")), "--passes", "nope")


def test_lifting_never_materialises_inputs():
    # the input of this problem is 64 GiB, more than this machine has
    problem = load_problem(KERNELBENCH / "level2_gemm_huge_inputs.py")
    g = lift(problem)
    assert g.inputs[0].shape == (4194304, 4096)
    assert [n.op for n in g.nodes if n.op not in ("input", "param", "scalar")] == ["linear", "sigmoid", "mul", "sum"]


def test_full_size_level2_conv_lifts():
    g = lift(load_problem(KERNELBENCH / "level2_conv2d_relu_biasadd_full.py"))
    assert g.outputs[0].shape == (128, 128, 254, 254)


def test_train_mode_keeps_batch_statistics_and_dropout():
    problem = load_problem(problem_path("norm_batch"))
    g = lift(problem, train=True)
    assert all(n.attrs["training"] for n in g.nodes if n.op == "batch_norm")
    inputs = problem.make_inputs(3)
    model = problem.build_model(0).train()
    from ir import run
    for a, b in zip(model(*inputs), run(g, inputs)):
        torch.testing.assert_close(b, a, atol=1e-5, rtol=1e-5)
    g = lift(load_problem(problem_path("rand_dropout")), train=True)
    assert [n.attrs["training"] for n in g.nodes if n.op == "dropout"] == [True]


@pytest.mark.parametrize("bad", ["return [1, 2]", "return torch.randn(3)"])
def test_get_inputs_must_return_tensors_list(tmp_path, bad):
    p = write(tmp_path, f"""
        import torch
        class Model(torch.nn.Module):
            def forward(self, x):
                return x
        def get_inputs():
            {bad}
        def get_init_inputs():
            return []
    """)
    from ir.errors import AkgError
    with pytest.raises(AkgError):
        lift(load_problem(p))
