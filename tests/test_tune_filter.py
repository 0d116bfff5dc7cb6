"""`akg tune --learned`: a random forest over the measurements so far picks which schedules of a kernel are
measured. The forest learns what a schedule's parameters say of its time; before it has rows enough, the
cost model's order picks; the rows outlive the run in the tuning database, and a learned tune measures a
quarter of what a full one does at most."""

from __future__ import annotations

import math
import random
from types import SimpleNamespace

from akg_agent.tune import tune
from akg_agent.tune_filter import FAILED, Forest, LearnedFilter, features
from akg_agent.tuning_db import TuningDB, hardware_key, versions
from dsl_backends import get_backend
from hardware_models.spec import load_target
from ir.kernel.schedule import Schedule

from .conftest import problem_path


def _kernel(numel: int = 1 << 16, last: int = 256) -> SimpleNamespace:
    return SimpleNamespace(kind="pointwise", out=SimpleNamespace(numel=numel), coords=[SimpleNamespace(extent=last)])


def _space(rng: random.Random) -> list[Schedule]:
    """A default, then eight others in an order the cost model got wrong (the fastest is never first)."""
    blocks = [64, 128, 256, 512, 1024, 2048, 4096, 8192]
    rng.shuffle(blocks)
    return [Schedule({"BLOCK": 256, "threads": 4}), *(Schedule({"BLOCK": b, "threads": 4}) for b in blocks)]


def _time(s: Schedule) -> float:  # the fastest at BLOCK 2048, each factor of two away 30% slower
    return 1e-3 * 1.3 ** abs(math.log2(s["BLOCK"]) - 11)


def test_the_forest_learns_a_parameters_effect():
    rng = random.Random(0)
    rows, ys = [], []
    for _ in range(40):
        s = Schedule({"BLOCK": 2 ** rng.randrange(5, 14), "threads": 4})
        rows.append(features(_kernel(), s, Schedule({"BLOCK": 256, "threads": 4}), 1, 9))
        ys.append(math.log(_time(s) / _time(Schedule({"BLOCK": 256}))))
    forest = Forest().fit(rows, ys)
    guess = {b: forest.predict(features(_kernel(), Schedule({"BLOCK": b, "threads": 4}),
                                        Schedule({"BLOCK": 256, "threads": 4}), 1, 9)) for b in (64, 2048, 8192)}
    assert guess[2048] < guess[64] and guess[2048] < guess[8192], guess


def test_the_cost_models_order_picks_until_the_forest_has_rows_then_the_forest_does():
    rng = random.Random(1)
    filt = LearnedFilter(share=0.25, min_rows=8)
    found = []
    for n in range(14):
        cands = _space(rng)
        picked = filt.pick(_kernel(), cands)
        assert picked[0] == 0 and len(picked) == 3  # a quarter of nine, rounded up; the default always
        if n == 0:
            assert picked == [0, 1, 2] and filt.by_model == 0
        new = filt.learn(_kernel(), cands, {i: _time(cands[i]) for i in picked})
        assert [s for s, _, _ in new] == [cands[i] for i in picked[1:]]
        found.append(min(_time(cands[i]) for i in picked) / min(_time(s) for s in cands))
    # the cost model's order (shuffled here) missed the fastest; the forest, once it has rows, finds it
    assert filt.by_model == 10 and max(found[:6]) > 1.2 and found[-7:] == [1.0] * 7, found


def test_once_trained_only_what_the_forest_predicts_faster_than_the_default_is_measured():
    """Where the default is the fastest (BLOCK 2048 here), a trained forest predicts no other faster: the
    kernel measures its default alone."""
    rng = random.Random(2)
    filt = LearnedFilter(share=0.25, min_rows=8)
    picks = []
    for _ in range(10):
        cands = _space(rng)
        cands[0] = Schedule({"BLOCK": 2048, "threads": 4})
        picked = filt.pick(_kernel(), cands)
        picks.append(len(picked))
        filt.learn(_kernel(), cands, {i: _time(cands[i]) for i in picked})
    assert picks[:4] == [3] * 4 and picks[-3:] == [1] * 3, picks


def test_a_failed_candidate_teaches_that_it_failed_and_a_failed_default_teaches_nothing():
    filt = LearnedFilter()
    cands = [Schedule({"BLOCK": 256}), Schedule({"BLOCK": 512}), Schedule({"BLOCK": 64})]
    rows = filt.learn(_kernel(), cands, {0: 1e-3, 1: math.inf, 2: 2e-3})
    assert [y for _, _, y in rows] == [FAILED, math.log(2.0)]
    assert filt.learn(_kernel(), cands, {0: math.inf, 1: 1e-3}) == [] and len(filt.rows) == 2


def test_rows_are_kept_in_the_tuning_database_newest_last(tmp_path):
    db = TuningDB(tmp_path / "t.sqlite")
    db.put_filter_rows("cpu:x", "cpp", "k1", "v", [(Schedule({"BLOCK": 1}), {"a": 1.0}, 0.5)])
    db.put_filter_rows("cpu:x", "cpp", "k2", "v", [(Schedule({"BLOCK": 2}), {"a": 2.0}, -0.5)])
    db.put_filter_rows("cpu:x", "triton", "k3", "v", [(Schedule({"BLOCK": 3}), {"a": 3.0}, 0.0)])
    assert db.filter_rows("cpu:x", "cpp", "v") == [({"a": 1.0}, 0.5), ({"a": 2.0}, -0.5)]
    assert db.filter_rows("cpu:x", "cpp", "v", last=1) == [({"a": 2.0}, -0.5)]


def test_a_learned_tune_measures_a_quarter_and_leaves_its_rows_for_the_next(tmp_path, monkeypatch):
    monkeypatch.setenv("AKG_CACHE_DIR", str(tmp_path / "cache"))
    db = TuningDB(tmp_path / "tuning.sqlite")
    prob = str(problem_path("l2_gemm_scale_sigmoid_sum"))
    rep = tune(prob, "cpu", "cpp", budget=8, db=db, strategies=False, learned=True, out=tmp_path / "t.py")
    ln = rep["learned"]
    assert rep["verdict"].startswith("accepted") and ln["rows_at_start"] == 0
    tried = sum(k["tried"] for k in rep["kernels"])
    assert ln["not_measured"] >= tried and rep["measured"] == tried  # at most about half measured
    hw, ver = hardware_key(load_target("cpu")), versions(get_backend("cpp").manifest)
    rows = db.filter_rows(hw, "cpp", ver)  # every measured one but the defaults
    assert rows and len(rows) == tried - sum(1 for k in rep["kernels"] if k["tried"])
