"""Shared checks: a graph against its source module, through the interpreter; a CUDA-C translation
verified where a GPU is, compiled for it where none is; a rendered module verified."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import torch

from akg_agent.verifier import verify
from ir import run
from ir.graph import Graph
from ir.problem import Problem

RNG_SEED = 4242


def module_outputs(problem: Problem, inputs: list, seed: int = 0, state: list[str] = ()) -> list[torch.Tensor]:
    """forward's outputs, then the buffers named in `state` after the call (a graph returns the new
    values of the buffers forward writes after its own outputs)."""
    model = problem.build_model(seed).eval()
    torch.manual_seed(RNG_SEED)  # random ops inside forward: the graph is run after the same seed
    with torch.no_grad():
        out = model(*inputs)
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    return outs + [model.get_buffer(k) for k in state]


def assert_matches_module(problem: Problem, g: Graph, seeds=(1, 2), atol=1e-5, rtol=1e-5) -> None:
    for s in seeds:
        inputs = problem.make_inputs(s)
        ref = module_outputs(problem, inputs, state=g.meta.get("mutations", []))
        torch.manual_seed(RNG_SEED)
        got = run(g, [x for x in inputs if isinstance(x, torch.Tensor)])
        assert len(ref) == len(got), f"{len(ref)} module outputs, {len(got)} graph outputs"
        for i, (a, b) in enumerate(zip(ref, got)):
            assert a.shape == b.shape, f"output {i}: shape {tuple(a.shape)} vs {tuple(b.shape)}"
            assert a.dtype == b.dtype, f"output {i}: dtype {a.dtype} vs {b.dtype}"
            torch.testing.assert_close(b, a, atol=atol, rtol=rtol, equal_nan=True,
                                       msg=lambda m, i=i, s=s: f"output {i}, seed {s}: {m}")


def assert_same_values(before: Graph, after: Graph, inputs: list, atol=1e-5, rtol=1e-5) -> None:
    torch.manual_seed(RNG_SEED)
    a = run(before, inputs)
    torch.manual_seed(RNG_SEED)
    b = run(after, inputs)
    for i, (x, y) in enumerate(zip(a, b)):
        assert x.shape == y.shape and x.dtype == y.dtype, f"output {i} changed type"
        torch.testing.assert_close(y, x, atol=atol, rtol=rtol, equal_nan=True)


def assert_verified_or_compiled(t: Any) -> None:
    """A CUDA-C translation (`akg_agent.translate.Translation`): verified where a GPU is here; compiled
    for it by nvcc, and not run, where none is."""
    if torch.cuda.is_available():
        assert t.verdict is not None and t.verdict.accepted, t.verdict.line() if t.verdict else "not run"
    else:
        assert t.compiled.startswith("compiled with") and t.compiled.endswith("not run"), t.compiled


def assert_source_verifies(problem: Path, source: str, tmp_path: Path, seeds: tuple[int, ...] = (0, 1)) -> None:
    """A module's source, written beside the problem, passes the verifier on the CPU."""
    cand = tmp_path / "cand.py"
    cand.write_text(source)
    v = verify(problem, cand, target="cpu", seeds=seeds)
    assert v.accepted, v.line()


def translated_cpp(tmp_path: Path, monkeypatch: Any, text: str, name: str, **options: Any) -> tuple[Path, Any, str]:
    """A problem's text written under `tmp_path` and translated untuned for C++ on the CPU (akg's cache kept
    under `tmp_path`): its path, the translation and the module's source."""
    from akg_agent.translate import build, render

    monkeypatch.setenv("AKG_CACHE_DIR", str(tmp_path / "cache"))
    path = tmp_path / f"{name}.py"
    path.write_text(text)
    t = build(path, "cpp", "cpu", tuned=False, **options)
    return path, t, render(t)


def import_written(tmp_path: Path, source: str, name: str) -> Any:
    """A rendered module imported from a file under `tmp_path` (its kernels compile on import)."""
    path = tmp_path / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


def problem_namespace(text: str) -> dict:
    """A problem's source run as a module: its Model, get_inputs and get_init_inputs."""
    ns: dict = {}
    exec(text, ns)  # noqa: S102 - a test's own problem text
    return ns
