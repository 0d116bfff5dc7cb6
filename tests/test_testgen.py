"""`akg testgen`: the standalone test file passes on the written module and fails on broken copies."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from akg_agent.cli import main
from akg_agent.translate import translate

from .conftest import problem_path

# a broken module's run: the seeded comparisons alone (the other tests of its file fail the same way)
SEEDED = ["-k", "test_matches_the_reference and not every_size and not other_values"]


def _pytest(path, tmp_path, *extra: str) -> subprocess.CompletedProcess:
    """The generated file run by pytest in a process of its own, its temporary files in a folder of their own
    (which must be left empty: the file's imported sources are removed when it ends)."""
    tmp = Path(tempfile.mkdtemp(prefix="tmp-", dir=tmp_path))
    res = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *extra, str(path)],
                         capture_output=True, text=True, cwd=tmp_path, timeout=300,
                         env={**os.environ, "TMPDIR": str(tmp)})
    assert not any(tmp.glob("akg-testgen-*")), list(tmp.iterdir())
    return res


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    d = tmp_path_factory.mktemp("testgen")
    t = translate(problem_path("state_rnn_cell"), "cpp", "cpu", timing=False, seeds=(0, 1))
    assert t.verdict.accepted
    (d / "rnn_cpp.py").write_text(t.source)
    return d, t.source


def test_the_generated_tests_pass_on_the_module_and_fail_on_broken_copies(written, tmp_path):
    d, source = written
    assert main(["testgen", str(problem_path("state_rnn_cell")), str(d / "rnn_cpp.py"), "-o",
                 str(tmp_path / "test_rnn.py")]) == 0
    ok = _pytest(tmp_path / "test_rnn.py", tmp_path)
    assert ok.returncode == 0 and "10 passed, 2 skipped" in ok.stdout, ok.stdout[-2000:]  # no run-time sizes

    broken = {  # off by 1e-3 in its output; forgets its state; no guard
        "off": source + "\n_f = ModelNew.forward\nModelNew.forward = lambda self, *a: _f(self, *a) + 1e-3\n",
        "stateless": source.replace("        _akg_get(self, 'hidden').copy_(tanh)\n", ""),
        "unguarded": source.replace("        _akg_guard(", "        (lambda a: None)("),
    }
    failing = {"off": "test_matches_the_reference", "stateless": "test_matches_the_reference",
               "unguarded": "test_the_guard_refuses"}
    for name, src in broken.items():
        assert src != source
        (tmp_path / f"{name}.py").write_text(src)
        main(["testgen", str(problem_path("state_rnn_cell")), str(tmp_path / f"{name}.py"), "-o",
              str(tmp_path / f"test_{name}.py")])
        res = _pytest(tmp_path / f"test_{name}.py", tmp_path)
        assert res.returncode == 1 and f"FAILED test_{name}.py::{failing[name]}" in res.stdout, \
            (name, res.stdout[-1500:])


def test_a_dynamic_module_is_tested_at_every_size_of_its_envelope(tmp_path):
    t = translate(problem_path("l2_gemm_gelu_softmax_layernorm"), "cpp", "cpu", timing=False, seeds=(0,),
                  dynamic="batch<=24")
    (tmp_path / "m.py").write_text(t.source)
    assert main(["testgen", str(problem_path("l2_gemm_gelu_softmax_layernorm")), str(tmp_path / "m.py"), "-o",
                 str(tmp_path / "test_m.py")]) == 0
    ok = _pytest(tmp_path / "test_m.py", tmp_path)
    assert ok.returncode == 0 and "15 passed, 1 skipped" in ok.stdout, ok.stdout[-2000:]  # 6 sizes, 1 to 24
    # a copy whose envelope says 2 where the kernels take 24 refuses the larger sizes
    narrow = t.source.replace("_AKG_DYNAMIC = {'batch': 24}", "_AKG_DYNAMIC = {'batch': 2}")
    assert narrow != t.source
    (tmp_path / "narrow.py").write_text(narrow)
    main(["testgen", str(problem_path("l2_gemm_gelu_softmax_layernorm")), str(tmp_path / "narrow.py"), "-o",
          str(tmp_path / "test_narrow.py")])
    res = _pytest(tmp_path / "test_narrow.py", tmp_path)
    assert res.returncode == 1 and "FAILED test_narrow.py::test_matches_the_reference_at_every_size_it_takes[17]" \
        in res.stdout, res.stdout[-1500:]


def test_a_file_without_model_new_is_a_clear_error(tmp_path, capsys):
    (tmp_path / "m.py").write_text("x = 1\n")
    assert main(["testgen", str(problem_path("state_rnn_cell")), str(tmp_path / "m.py")]) != 0
    err = capsys.readouterr().err.strip()
    assert err.startswith("akg: error:") and "defines no ModelNew" in err and len(err.splitlines()) == 1


# ten suite problems across op families: pointwise, GEMM + epilogue, norms, reductions, scans, movement,
# losses, attention, convolution (a declared library call), integer outputs
TEN = ["ew_activations_a", "l2_gemm_scale_sigmoid_sum", "norm_layer_rms", "red_var_std", "scan_cumsum_cumprod",
       "mv_reshape_permute", "loss_mse_huber_l1", "attention_sdpa", "l2_conv_relu_biasadd", "red_argmax_argmin"]
OFF = '''
_akg_forward = ModelNew.forward


def _akg_off(self, *args):  # every output nudged: values off by 1e-3, relative where large (indices by one)
    out = _akg_forward(self, *args)
    nudge = (lambda o: o + 1 if not o.is_floating_point() else o + 1e-3 * (1 + o.abs()))
    return tuple(nudge(o) for o in out) if isinstance(out, tuple) else nudge(out)


ModelNew.forward = _akg_off
'''


def test_ten_suite_problems_pass_on_their_modules_and_fail_on_broken_ones(tmp_path):
    good, bad = tmp_path / "good", tmp_path / "bad"
    good.mkdir()
    bad.mkdir()
    for name in TEN:
        t = translate(problem_path(name), "cpp", "cpu", timing=False, seeds=(0,))
        assert t.verdict.accepted, (name, t.verdict.reason)
        (tmp_path / f"{name}.py").write_text(t.source)
        (tmp_path / f"{name}_off.py").write_text(t.source + OFF)
        assert main(["testgen", str(problem_path(name)), str(tmp_path / f"{name}.py"), "-o",
                     str(good / f"test_{name}.py")]) == 0
        assert main(["testgen", str(problem_path(name)), str(tmp_path / f"{name}_off.py"), "-o",
                     str(bad / f"test_{name}.py")]) == 0
    ok = _pytest(good, tmp_path)
    assert ok.returncode == 0 and " failed" not in ok.stdout, ok.stdout[-3000:]
    res = _pytest(bad, tmp_path, *SEEDED)
    failed = {ln.split("::")[0].removeprefix("FAILED ").split("/")[-1] for ln in res.stdout.splitlines()
              if ln.startswith("FAILED") and "test_matches_the_reference[" in ln}
    assert res.returncode == 1 and failed == {f"test_{n}.py" for n in TEN}, (sorted(failed), res.stdout[-1500:])


def test_a_pallas_tpu_module_gets_its_test_file_in_a_new_folder(tmp_path):
    """The MaxKernel loop's last step: a Pallas TPU module (TPU interpret mode here) and its test file,
    which passes on it and fails on a nudged copy; -o may name a folder not yet made."""
    pytest.importorskip("jax")
    t = translate(problem_path("softmax_logsoftmax"), "pallas", "tpu-v5p", timing=False, seeds=(0,))
    (tmp_path / "sm.py").write_text(t.source)
    (tmp_path / "sm_off.py").write_text(t.source + OFF)
    for name, sub in (("sm", "good"), ("sm_off", "bad")):
        assert main(["testgen", str(problem_path("softmax_logsoftmax")), str(tmp_path / f"{name}.py"), "-o",
                     str(tmp_path / sub / "new" / "test_sm.py")]) == 0
    assert _pytest(tmp_path / "good" / "new", tmp_path).returncode == 0
    bad = _pytest(tmp_path / "bad" / "new", tmp_path, *SEEDED)
    assert bad.returncode == 1 and "test_matches_the_reference[" in bad.stdout
