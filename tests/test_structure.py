"""The tree's structure: no import circles between project modules, no project module imported inside a
function (that hides circles), no DSL named outside its backend folder, and every backend answering
every call the core makes."""

from __future__ import annotations

import ast
import inspect
import math
import re
from pathlib import Path

import pytest

from akg_agent.bench.rank import rank_schedules
from akg_agent.ranking import estimated
from akg_agent.translate import build, render
from dsl_backends import Backend, UnsupportedKernel, available, get_backend
from dsl_backends.base import Capabilities, Manifest
from hardware_models.spec import load_target, target_names
from ir.errors import AkgError
from ir.kernel.expand import COMPOSITES, PRIMITIVES, composites_left
from ir.kernel.ir import Op, walk
from ir.kernel.schedule import Schedule

from .conftest import ROOT, problem_path

PACKAGES = ("akg_agent", "ir", "dsl_backends", "hardware_models", "prompts")


def _modules() -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for p in (ROOT / pkg).rglob("*.py"):
            parts = list(p.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = p
    return out


def _resolve(mod: str, is_pkg: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = mod.split(".") if is_pkg else mod.split(".")[:-1]
    base = base[:len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _imports(mods: dict[str, Path]) -> tuple[dict[str, set[str]], list[str]]:
    """Module -> project modules it imports at module level; and every function-local project import."""
    graph: dict[str, set[str]] = {m: set() for m in mods}
    local: list[str] = []

    def target(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    for mod, path in mods.items():
        tree = ast.parse(path.read_text())
        is_pkg = path.name == "__init__.py"
        funcs = {id(n) for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
                 for n in ast.walk(f)}
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                src = _resolve(mod, is_pkg, node)
                names = [f"{src}.{a.name}" for a in node.names] + [src]
            found = {t for n in names if (t := target(n)) and t != mod}
            # `from pkg import submodule` depends on the submodule; `from pkg import name` on pkg
            if isinstance(node, ast.ImportFrom) and found:
                sub = {t for t in found if t != _resolve(mod, is_pkg, node)}
                found = sub or found
            if not found:
                continue
            if id(node) in funcs:
                local.append(f"{path.relative_to(ROOT)}:{node.lineno} imports {', '.join(sorted(found))}")
            else:
                graph[mod] |= found
    return graph, local


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    return out


def test_no_import_circles_between_project_modules():
    graph, _ = _imports(_modules())
    assert _cycles(graph) == []


def test_the_circle_check_can_fail():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_project_module_is_imported_inside_a_function():
    _, local = _imports(_modules())
    assert local == []


MAX_PARAMS = 8
CLI_LAYER = ("akg_agent.cli", "akg_agent.commands")  # argparse's namespace is unpacked there


def _long_signatures(modules: dict[str, Path]) -> list[str]:
    """Functions of more than MAX_PARAMS parameters (self and cls not counted; *args and **kwargs are)."""
    out = []
    for mod, path in modules.items():
        if mod.startswith(CLI_LAYER):
            continue
        for n in ast.walk(ast.parse(path.read_text())):
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
                a = n.args
                names = [x.arg for x in [*a.posonlyargs, *a.args, *a.kwonlyargs, *filter(None, (a.vararg, a.kwarg))]]
                if len([x for x in names if x not in ("self", "cls")]) > MAX_PARAMS:
                    out.append(f"{mod}:{n.lineno} {n.name}")
    return out


def test_no_function_outside_the_cli_takes_more_than_eight_parameters(tmp_path):
    """Options travel as one value (PlanOptions, CheckOptions, TuneOptions), an ATen call's many arguments
    as one `Bound` value by name."""
    assert _long_signatures(_modules()) == []
    wide = tmp_path / "wide.py"
    wide.write_text("def f(a, b, c, d, e, f, g, h, *rest):\n    pass\n\n\nclass C:\n"
                    "    def m(self, a, b, c, d, e, f, g, h):\n        pass\n")
    assert _long_signatures({"ir.wide": wide}) == ["ir.wide:1 f"]


DSL_NAMES = ("triton", "tilelang", "cuda-c", "cuda_c", "pallas", "metal", "cpp")
# the port frontend reads kernels written in a DSL (its source language, not a target backend): it names
# the language it lifts and the ones it does not lift yet
SOURCE_FRONTENDS = ("ir.port", "akg_agent.port", "akg_agent.port_llm", "akg_agent.commands.port")


def test_no_dsl_is_named_outside_its_backend_folder():
    """The core finds backends through their manifests: no string literal outside dsl_backends/<name>/
    names a DSL (module paths and prose in docstrings and comments are not string literals)."""
    hits = []
    pattern = re.compile(r"\b(" + "|".join(re.escape(d) for d in DSL_NAMES) + r")\b", re.IGNORECASE)
    for mod, path in _modules().items():
        parts = mod.split(".")
        if parts[0] == "dsl_backends" and len(parts) > 2:
            continue  # a backend's own folder
        if any(mod == f or mod.startswith(f + ".") for f in SOURCE_FRONTENDS):
            continue
        tree = ast.parse(path.read_text())
        docs = {id(n.body[0].value) for n in ast.walk(tree)
                if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                and n.body and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
                if m := pattern.search(node.value):
                    hits.append(f"{path.relative_to(ROOT)}:{node.lineno}: {m.group(0)!r} in {node.value[:60]!r}")
    assert hits == []


def _target_for(m) -> str:
    """A hardware model each backend's manifest targets."""
    return next(n for n in target_names() if m.supports(load_target(n)))


@pytest.mark.parametrize("dsl", sorted(available()))
def test_every_backend_answers_every_call_the_core_makes(dsl):
    """The Backend protocol against each backend: the same names and parameters, and each call made on
    a program with pointwise, reduce and GEMM kernels returns what the core expects."""
    be = get_backend(dsl)
    for name in ("default_schedule", "tuning_space", "tiling", "render_kernel", "launch", "render_module",
                 "compile_only"):
        want = list(inspect.signature(getattr(Backend, name)).parameters)
        assert list(inspect.signature(getattr(be, name)).parameters) == want[1:], name
    assert be.manifest == available()[dsl] and isinstance(be.overrides, frozenset)
    t = build(problem_path("l2_gemm_scale_sigmoid_sum"), dsl, _target_for(be.manifest))
    assert {k.kind for k in t.program.kernels()} >= {"matmul"}
    for k in t.program.kernels():
        s = be.default_schedule(k, t.target)
        space = be.tuning_space(k, t.target)
        assert isinstance(s, Schedule) and space and all(isinstance(x, Schedule) for x in space)
        assert isinstance(be.render_kernel(k, s, t.target), str)
        assert all(isinstance(ln, str) for ln in be.launch(k, s, lambda b: b.name if b else "None"))
    assert render(t).startswith("# Generated by akg translate")
    try:
        assert "not run" in be.compile_only(t.program, t.schedules, t.target)
    except UnsupportedKernel:
        assert t.executor != "compile-only"  # only a backend with that executor must compile here


@pytest.mark.parametrize("dsl", sorted(available()))
def test_hw_rank_estimates_every_backends_gemm_space(dsl):
    """`akg hw rank` reads a backend's GEMM schedules as the backend states them (`Backend.tiling`): every
    backend with tiles gets estimates (no KeyError for thread tiles or CPU register blocks)."""
    be = get_backend(dsl)
    t = build(problem_path("mm_square"), dsl, _target_for(be.manifest), tuned=False)  # a generated GEMM
    [k] = [k for k in t.program.kernels() if k.kind == "matmul"]
    grp = next(g for g in t.plan.groups if g.id == k.group)
    space = be.tuning_space(k, t.target)
    est = estimated(grp, t.target, space, be)
    named = [s for s in space if "BM" in s or "MR" in s]
    assert len(est) == len(named)
    if named:  # the model prices some tile of every space that has tiles
        assert any(math.isfinite(e.time_s) and e.time_s > 0 for e, _ in est)
    else:  # a space without tiles (NumPy's): rank says so in one line, before timing anything
        with pytest.raises(AkgError, match="has no tile schedule the cost model can estimate"):
            rank_schedules(str(problem_path("mm_square")), _target_for(be.manifest), dsl, n=2)


@pytest.mark.parametrize("dsl", sorted(available()))
def test_renderers_see_primitives_and_their_overrides_only(dsl):
    """Composite ops are expanded once on the kernel IR: what a backend renders holds no composite
    beyond the overrides it lists."""
    be = get_backend(dsl)
    assert be.overrides <= COMPOSITES
    for name in ("ew_activations_a", "ew_activations_b", "ew_swish_mish_softsign", "ew_clamp_variants"):
        t = build(problem_path(name), dsl, _target_for(be.manifest))
        for k in t.program.kernels():
            assert composites_left(k, be.overrides) == set(), (name, k.name)
            ops = {e.op for e in walk(k.expr) if isinstance(e, Op)}
            assert ops <= PRIMITIVES | be.overrides, (name, k.name, ops - PRIMITIVES)


@pytest.mark.parametrize("dsl", sorted(available()))
def test_a_module_carries_its_targets_schedule_wherever_it_is_written(dsl, monkeypatch):
    """Written here, where the GPU is absent (checked by an interpreter or emulator), a module for a GPU
    target carries the schedules it gets where the device is present: a GEMM translated on a laptop for
    an H100 once kept interpreter tiles (BK=128, one stage) and ran 75x slower there."""
    from akg_agent import translate as tr

    be = get_backend(dsl)
    name = _target_for(be.manifest)
    absent = build(problem_path("l2_gemm_scale_sigmoid_sum"), dsl, name)
    monkeypatch.setattr(tr, "device_present", lambda target: True)
    present = build(problem_path("l2_gemm_scale_sigmoid_sum"), dsl, name)
    assert dict(absent.schedules) == dict(present.schedules)


KERNEL_KINDS = {"pointwise", "reduce", "matmul", "rownorm", "window", "conv", "scan", "attention"}


@pytest.mark.parametrize("dsl", sorted(available()))
def test_a_manifests_kinds_are_kernel_kinds_and_its_capabilities_a_typed_record(dsl):
    """`kinds` names the templates a backend renders; what they can do besides is `[capabilities]`, typed."""
    m = available()[dsl]
    assert set(m.kinds) <= KERNEL_KINDS, set(m.kinds) - KERNEL_KINDS
    assert isinstance(m.capabilities, Capabilities) and isinstance(m.capabilities.transposed_bytes, int)


def test_an_unknown_capability_is_a_one_line_error(tmp_path):
    path = tmp_path / "manifest.toml"
    path.write_text('name = "x"\ndescription = "x"\nentry = "x:Y"\n\n[capabilities]\nsibling = true\n')
    with pytest.raises(AkgError, match="unknown capabilities sibling"):
        Manifest.load(path)


def test_importing_ir_registers_nothing_by_side_effect_and_every_pass_is_found_by_name():
    """`import ir` loads no module only for what it registers; a pass defined with the kernel IR (row
    fusion) is found when a pipeline names it, and a composite's meaning when it is first evaluated."""
    code = ("import sys, torch, ir\n"
            "from ir.passes import REGISTRY, pass_class\n"
            "assert 'ir.kernel.rows' not in sys.modules and 'rows' not in REGISTRY, sorted(REGISTRY)\n"
            "assert pass_class('rows').name == 'rows' and pass_class('flash').name == 'flash'\n"
            "from ir.interp import EvalCtx, eval_op\n"
            "y = eval_op('softmax', [torch.zeros(2, 3)], {'dim': -1}, EvalCtx())\n"
            "assert torch.allclose(y, torch.full((2, 3), 1 / 3))\n")
    import subprocess
    import sys
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
