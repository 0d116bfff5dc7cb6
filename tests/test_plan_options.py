"""Plan options and the pass pipeline as values (`akg_agent.plan_options`, `ir.passes.PassPipeline`)."""

from __future__ import annotations

import pytest

from akg_agent.plan_options import PlanOptions, pipeline_for
from akg_agent.strategy import Strategy
from akg_agent.translate import build
from dsl_backends import get_backend
from hardware_models.spec import load_target
from ir.passes import PassPipeline

from .conftest import problem_path

TARGETS = {"cpp": ["cpu"], "cuda-c": ["h200"], "metal": ["m4-max"], "pallas": ["h200", "tpu-v6e"],
           "tilelang": ["h200"], "triton": ["h200", "mi300x"]}


@pytest.mark.parametrize("dsl", sorted(TARGETS))
def test_each_backends_pipeline_prints_as_text_that_reads_back_to_the_same_value(dsl):
    backend = get_backend(dsl)
    for target in [None, *map(load_target, TARGETS[dsl])]:
        for how in (Strategy(), Strategy(rows=False, conv="channels-last", library=("gemm",))):
            p = pipeline_for(backend, target, how)
            assert isinstance(p, PassPipeline) and PassPipeline.parse(str(p)) == p
            assert str(p).startswith("simplify,decompose") and str(p).count(",") == len(p.passes) - 1


def test_a_pipeline_names_only_what_its_target_and_strategy_ask_for():
    triton = get_backend("triton")
    plain = str(pipeline_for(triton))
    assert "splitk" not in plain and "kmajor" not in plain and "library" not in plain
    gpu = str(pipeline_for(triton, load_target("h200"), Strategy(library=("gemm",))))
    assert "splitk{units=132}" in gpu and ",kmajor," in gpu and gpu.index(",library") < gpu.index(",kmajor,")


def test_build_takes_the_options_value_or_its_fields_by_keyword_alike():
    p = problem_path("l2_gemm_scale_sigmoid_sum")
    by_value = build(p, "cpp", "cpu", PlanOptions(tuned=False, rows=False))
    by_keyword = build(p, "cpp", "cpu", tuned=False, rows=False)
    assert by_value.strategy == by_keyword.strategy == Strategy(rows=False)
    assert by_value.schedules == by_keyword.schedules
    with pytest.raises(TypeError):
        build(p, "cpp", "cpu", tuned=False, row=False)  # a misspelt option is an error, not ignored
