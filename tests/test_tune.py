"""`akg tune`: measured candidates land in the tuning database; a repeated run is served from it."""

from __future__ import annotations

import pytest
import torch

from akg_agent.tune import TuningDB, tune
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
