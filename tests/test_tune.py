"""`akg tune`: measured candidates land in the tuning database; a repeated run is served from it."""

from __future__ import annotations

import math

import pytest
import torch

from akg_agent.ranking import ranked_space
from akg_agent.translate import build, header
from akg_agent.tune import tune
from akg_agent.tuning_db import TuningDB, hardware_key, kernel_signature, versions
from dsl_backends import get_backend
from ir.errors import AkgError

from .conftest import problem_path


def test_tune_remembers_every_measurement(tmp_path, monkeypatch):
    monkeypatch.setenv("AKG_CACHE_DIR", str(tmp_path / "cache"))
    db = TuningDB(tmp_path / "tuning.sqlite")
    out = tmp_path / "tuned.py"
    first = tune(str(problem_path("l2_gemm_scale_sigmoid_sum")), "cpu", "cpp", budget=2, out=out, db=db)
    assert first["measured"] >= 2 and first["from_db"] == 0 and db.count() == first["measured"]
    assert first["verdict"].startswith("accepted") and "measured:" in out.read_text()
    cands = first["candidates"]
    assert len(cands) == first["measured"] and all(c["median_s"] > 0 for c in cands)
    assert all(c["max_err_vs_float64"] is not None and c["torch_err_vs_float64"] is not None for c in cands)
    again = tune(str(problem_path("l2_gemm_scale_sigmoid_sum")), "cpu", "cpp", budget=2, out=out, db=db)
    assert again["measured"] == 0 and again["from_db"] == first["measured"]
    assert [k["best"] for k in again["kernels"]] == [k["best"] for k in first["kernels"]]


@pytest.mark.gpu
def test_tune_measures_split_precision_beside_fp32_on_the_gpu(tmp_path, monkeypatch):
    monkeypatch.setenv("AKG_CACHE_DIR", str(tmp_path / "cache"))
    rep = tune(str(problem_path("mm_square")), "h100", "triton", budget=4, db=TuningDB(tmp_path / "t.sqlite"))
    precisions = {c["schedule"].get("input_precision", "ieee") for c in rep["candidates"] if c["median_s"]}
    assert precisions == {"ieee", "tf32x3"}, rep["candidates"]


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU refusal")
def test_tune_refuses_an_interpreter():
    with pytest.raises(AkgError, match="times mean nothing"):
        tune(str(problem_path("mm_square")), "h100", "triton", budget=1)


def test_translate_takes_each_kernels_best_schedule_from_the_tuning_database(tmp_path, monkeypatch):
    monkeypatch.setenv("AKG_CACHE_DIR", str(tmp_path))
    path = problem_path("l2_gemm_scale_sigmoid_sum")
    plain = build(path, "cpp", "cpu")  # no database yet: the cost model's schedules
    backend = get_backend("cpp")
    groups = {g.id: g for g in plain.plan.groups}
    k = next(k for k in plain.program.kernels() if k.kind == "matmul")
    others = [s for s in ranked_space(backend, k, groups.get(k.group), plain.target) if s != plain.schedules[k.name]]
    sig = kernel_signature(backend.render_kernel(k, plain.schedules[k.name], plain.target))
    hw, ver, db = hardware_key(plain.target), versions(backend.manifest), TuningDB()
    db.put(hw, "cpp", sig, ver, plain.schedules[k.name], 2e-3, "accepted: measured")
    db.put(hw, "cpp", sig, ver, others[0], 1e-3, "accepted: measured")
    db.put(hw, "cpp", sig, ver, others[1], math.inf, "rejected: values off")
    db.put("another-cpu", "cpp", sig, ver, others[2], 1e-4, "accepted: measured")  # not this hardware
    tuned = build(path, "cpp", "cpu")
    assert tuned.schedules[k.name] == others[0] and tuned.tuned == {k.name: 1e-3}
    assert all(tuned.schedules[n] == s for n, s in plain.schedules.items() if n != k.name)
    assert f"{k.name}: generated matmul kernel" in header(tuned) and "from the tuning database: 1 ms" in header(tuned)
    assert build(path, "cpp", "cpu", tuned=False).schedules == plain.schedules
