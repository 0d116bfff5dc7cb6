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
    again = tune(str(problem_path("l2_gemm_scale_sigmoid_sum")), "cpu", "cpp", budget=2, out=out, db=db)
    assert again["measured"] == 0 and again["from_db"] == first["measured"]
    assert [k["best"] for k in again["kernels"]] == [k["best"] for k in first["kernels"]]


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU refusal")
def test_tune_refuses_an_interpreter():
    with pytest.raises(AkgError, match="times mean nothing"):
        tune(str(problem_path("mm_square")), "h100", "triton", budget=1)
