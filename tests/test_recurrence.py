"""nn.RNN / nn.LSTM / nn.GRU: lifted as one `recurrence` op (traced as one op, not step by step),
its meaning checked against torch, its decomposition checked against its meaning, and written
modules verified in C++ and through Triton's interpreter."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import akg_agent.strategy as strategy_module
from akg_agent.strategy import has_long_recurrence
from akg_agent.translate import build, translate
from akg_agent.verifier import model_of
from ir import run
from ir.errors import AkgError
from ir.lift import lift
from ir.passes import run_passes
from ir.problem import load_problem

PROBLEM = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.{cls}({feat}, {hid}, {layers}, bias={bias}, batch_first={bf}, bidirectional={bi}{extra})

    def forward(self, x{hargs}):
        out, h = self.rnn(x{hpass})
        return {ret}


def get_inputs():
    return [torch.randn({xshape}){hin}]


def get_init_inputs():
    return []
'''


def _problem(tmp_path, cls: str, *, layers: int = 1, bias: bool = True, bf: bool = False, bi: bool = False,
             with_h: bool = True, steps: int = 4, batch: int = 3, feat: int = 6, hid: int = 5,
             extra: str = "", ret: str = "", name: str = "") -> object:
    d = 2 if bi else 1
    state = f"torch.randn({layers * d}, {batch}, {hid})"
    lstm = cls == "LSTM"
    hargs, hpass, hin = "", "", ""
    if with_h:
        hargs, hpass = (", h0, c0", ", (h0, c0)") if lstm else (", h0", ", h0")
        hin = f", {state}, {state}" if lstm else f", {state}"
    ret = ret or ("out, h[0], h[1]" if lstm else "out, h")
    src = PROBLEM.format(cls=cls, feat=feat, hid=hid, layers=layers, bias=bias, bf=bf, bi=bi, extra=extra,
                         hargs=hargs, hpass=hpass, hin=hin, ret=ret,
                         xshape=f"{batch}, {steps}, {feat}" if bf else f"{steps}, {batch}, {feat}")
    path = tmp_path / f"{cls.lower()}_{layers}{int(bias)}{int(bf)}{int(bi)}{int(with_h)}{name}.py"
    path.write_text(src)
    return path


CONFIGS = [  # (class, options): cells, 1-3 layers, both directions, batch_first, biases, initial state
    ("LSTM", dict(layers=2, bi=True)),
    ("LSTM", dict(layers=3, bf=True, with_h=False)),
    ("LSTM", dict(bias=False)),
    ("GRU", dict(layers=3, bi=True, bf=True)),
    ("GRU", dict(with_h=False)),
    ("GRU", dict(layers=2, bias=False, bi=True, with_h=False)),
    ("RNN", dict(layers=2, bi=True)),
    ("RNN", dict(extra=", nonlinearity='relu'", bf=True, layers=3)),
]


@pytest.mark.parametrize("cls,opts", CONFIGS, ids=[f"{c}-{i}" for i, (c, _) in enumerate(CONFIGS)])
def test_the_recurrence_means_what_torch_computes(cls, opts, tmp_path):
    p = load_problem(_problem(tmp_path, cls, **opts))
    g = lift(p)
    assert sum(n.op == "recurrence" for n in g.nodes) == (3 if cls == "LSTM" else 2)
    inputs = p.make_inputs(1)
    with torch.no_grad():
        ref = p.build_model(0).eval()(*inputs)
    flat = g.copy()
    run_passes(flat, "simplify,decompose,simplify")
    assert not any(n.op == "recurrence" for n in flat.nodes)
    # the composite (its meaning) and its primitives, each against torch
    for got in (run(g, inputs), run(flat, inputs)):
        for a, b in zip(got, ref):
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


def test_results_read_together_share_one_computation(tmp_path):
    """out, h_n and c_n are three nodes; after decomposition CSE leaves one set of steps."""
    def gemms(ret: str) -> int:
        g = lift(load_problem(_problem(tmp_path, "LSTM", layers=2, steps=3, ret=ret, name=ret[:3])))
        run_passes(g, "simplify,decompose,simplify")
        return sum(n.op == "linear" for n in g.nodes)

    # per layer: one projection GEMM over all steps, then one GEMM per step
    assert gemms("out, h[0], h[1]") == gemms("out") == 2 * (1 + 3)


def test_a_long_sequence_lifts_as_one_op_not_step_by_step(tmp_path):
    """KernelBench's 6-layer bidirectional LSTM over 512 steps: torch.export would trace every step."""
    p = load_problem(_problem(tmp_path, "LSTM", layers=6, bi=True, steps=512, batch=10, feat=128, hid=256))
    g = lift(p)
    rec = [n for n in g.nodes if n.op == "recurrence"]
    assert rec and rec[0].shape == (512, 10, 512)
    assert sum(n.op not in ("input", "param") for n in g.nodes) <= 3


def test_projected_lstm_is_a_clear_error(tmp_path):
    p = load_problem(_problem(tmp_path, "LSTM", extra=", proj_size=3", with_h=False, ret="out"))
    with pytest.raises(AkgError, match="proj_size"):
        lift(p)


@pytest.mark.parametrize("dsl,target,cls,opts", [
    ("cpp", "cpu", "LSTM", dict(layers=2, bi=True, steps=2)),
    ("cpp", "cpu", "GRU", dict(layers=2, bi=True, bf=True, steps=2)),
    ("cpp", "cpu", "RNN", dict(layers=3, bias=False, extra=", nonlinearity='relu'", steps=2)),
    ("triton", "h100", "LSTM", dict(layers=2, bi=True, steps=2)),
    ("triton", "h100", "GRU", dict(layers=2, bf=True, steps=2, with_h=False)),
    ("triton", "h100", "RNN", dict(layers=2, bi=True, steps=2)),
])
def test_recurrent_layers_translate_and_verify(dsl, target, cls, opts, tmp_path):
    t = translate(_problem(tmp_path, cls, **opts), dsl, target, timing=False, seeds=(0, 1))
    assert t.verdict.accepted, t.verdict.reason


@pytest.mark.gpu
@pytest.mark.parametrize("dsl", ["triton", "cuda-c", "tilelang", "pallas"])
def test_recurrent_layers_run_natively_on_the_gpu(dsl, tmp_path):
    for cls, opts in (("LSTM", dict(layers=2, bi=True, steps=5)), ("GRU", dict(layers=2, bf=True, with_h=False)),
                      ("GRU", dict(layers=3, bi=True, steps=64, batch=10, name="long"))):  # cuDNN's layer
        t = translate(_problem(tmp_path, cls, **opts), dsl, "h100", timing=False, seeds=(0, 1))
        assert t.verdict.accepted, (cls, t.verdict.reason)


def test_a_long_recurrence_is_torchs_layer_in_a_hybrid_plan_and_generated_when_pure(tmp_path, monkeypatch):
    """Past the target's bound of steps x layers x directions (lowered here to keep the test small), a hybrid
    plan calls torch's layer; --pure still generates every step. On the CPU the bound is far past a GPU's:
    torch's CPU layer runs each step's ops one by one, where a generated step fuses its gates."""
    monkeypatch.setattr(strategy_module, "CPU_RECURRENCE_STEPS", 4)
    path = _problem(tmp_path, "LSTM", bi=True, steps=3, batch=2)
    t = translate(path, "cpp", "cpu", timing=False, seeds=(0, 1))
    assert t.verdict.accepted, t.verdict.reason
    assert [s.op for s in t.program.library_calls()] == ["recurrence"] * 3  # out, h_n, c_n
    assert "torch.ops.aten.lstm.input(" in t.source and "library call torch recurrence" in t.source
    pure = build(path, "cpp", "cpu", pure=True)
    assert not pure.program.library_calls() and len(pure.program.kernels()) > 6
    # the set's GRU language model: 2 layers over 128 steps generated on the CPU, cuDNN's layer on a GPU
    monkeypatch.undo()
    g = lift(load_problem(_problem(tmp_path, "GRU", layers=2, bf=True, steps=128, batch=2, name="lm")))
    assert not has_long_recurrence(g, model_of("cpu")) and has_long_recurrence(g, model_of("h100"))
    # at batch 4 the CPU's step GEMMs call MKL, which lost to torch's layer at any length (an LSTM tagger,
    # 64 steps: 11.5 ms vs 5.4)
    wide = lift(load_problem(_problem(tmp_path, "GRU", layers=2, bf=True, steps=128, batch=4, name="wide")))
    assert has_long_recurrence(wide, model_of("cpu"))


@pytest.mark.parametrize("dsl, target", [("cpp", "cpu"), ("triton", "h100")])
def test_cells_stepped_in_a_loop_lift_as_gemms_and_gates(dsl, target, tmp_path):
    path = Path(__file__).parent / "fixtures" / "rnn_cells.py"
    g = lift(load_problem(path))
    assert "opaque" not in g.ops() and g.ops().count("linear") == 24  # 3 steps x 4 cells x 2 GEMMs
    t = translate(path, dsl, target, out=tmp_path / "m.py", timing=False, seeds=(0, 1))
    assert t.verdict is not None and t.verdict.accepted, t.verdict


def test_a_loop_of_hundreds_of_steps_lifts_lowers_and_renders(tmp_path):
    """KernelBench level 3 #34's form (an RNN cell in a Python loop, the outputs stacked) at 600 steps: the
    stack's select was a chain as deep as the steps, and the composite expansion recursed past Python's
    limit; now a stack of many pieces is torch's copy and a stack of a few a balanced tree of selects."""
    problem = tmp_path / "rnn_loop.py"
    problem.write_text('''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.i2h = nn.Linear(8 + 8, 8)
        self.h2o = nn.Linear(8, 4)

    def forward(self, x, h):
        outs = []
        for t in range(x.shape[0]):
            h = torch.tanh(self.i2h(torch.cat((x[t], h), dim=1)))
            outs.append(self.h2o(h))
        return torch.stack(outs, dim=0)


def get_inputs():
    return [torch.rand(600, 2, 8), torch.rand(2, 8)]


def get_init_inputs():
    return []
''')
    t = translate(problem, "cpp", "cpu", verify_result=False, timing=False)
    assert "torch.cat([" in t.source  # the 600 outputs stacked by torch's copy
