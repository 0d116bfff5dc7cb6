"""`akg port`: a module whose forward launches Triton kernels, written again in another DSL or for another
chip. The original is the reference: a problem file that imports it (its `ModelNew` as `Model`, the
inputs from the problem file given or from the module itself) is written beside the output, and the port
is verified against it (on this CPU the original runs under Triton's interpreter). Each launch is lifted
through its TTIR (`ir.port`), so the port goes through the same passes, fusion and renderers as a lifted
PyTorch program: kernels the original launched apart may be fused. A JAX program (`model`, `get_params`,
`get_inputs`) whose kernels are `pallas_call`s is its own reference: each call is lifted through its
jaxpr (`ir.port.pallas`)."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import torch

from ir.errors import AkgError
from ir.jax_lift import is_jax_problem

from .agents.llm import Model
from .port_llm import Job, Rewrite, rewrite
from .translate import Translation, translate

REFERENCE = '''"""The reference of a port (written by `akg port`): {module}'s ModelNew, run as written, with
the inputs of {inputs}."""
import importlib.util
import os
import sys

import torch

def _load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


# without a GPU the original runs under Triton's interpreter (read when Triton is first imported, and at
# each launch)
if not torch.cuda.is_available() and "triton" not in sys.modules:
    os.environ["TRITON_INTERPRET"] = "1"
if not torch.cuda.is_available():  # Triton's interpreter cannot time configs: autotune takes the first
    try:
        from triton.runtime.autotuner import Autotuner
        Autotuner._bench = lambda self, *args, config, **kwargs: [0.0, 0.0, 0.0]
    except ImportError:
        pass
_original = _load("akg_port_original", {module_path!r})
_inputs = _original if {problem_path!r} is None else _load("akg_port_problem", {problem_path!r})
Model = _original.ModelNew
get_inputs = _inputs.get_inputs
get_init_inputs = _inputs.get_init_inputs
'''


@dataclass
class Port:
    reference: Path
    kernels: list[dict]  # the launches lifted through their TTIR
    translation: Translation | None = None  # the lifted program, written and verified
    rewritten: Rewrite | None = None  # or the module a model wrote, and its attempts


def _defines(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    return {n.name for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))} | \
        {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}


def port(module: str | Path, dsl: str, target: str, out: str | Path, problem: str | Path | None = None,
         timing: bool = True, model: Model | None = None, budget: int = 3) -> Port:
    """Lift and write the module's kernels; with `model`, what cannot be lifted is written by the model
    (the whole module), each attempt verified against the original."""
    module = Path(module)
    if not module.is_file():
        raise AkgError(f"no such module: {module}")
    if is_jax_problem(module):  # a JAX program whose kernels are Pallas calls: itself the reference
        t = translate(module, dsl, target, out, timing=timing)
        return Port(module, list(t.graph.meta.get("ported", [])), translation=t)
    try:
        names = _defines(module)
    except SyntaxError as e:
        raise AkgError(f"{module.name} does not parse: {e.msg} (line {e.lineno})") from None
    if "ModelNew" not in names:
        raise AkgError(f"{module.name} defines no ModelNew: akg port takes a KernelBench-style solution module")
    text = module.read_text()
    if "triton" not in text and model is None:
        kind = "CUDA-C (load_inline)" if "load_inline" in text or "__global__" in text else \
            "Pallas" if "pallas" in text else "its"
        raise AkgError(f"{module.name} launches no Triton kernel: lifting {kind} kernels is not built yet "
                       "(akg port lifts Triton kernels through their TTIR and Pallas through their jaxpr); "
                       "give --llm MODEL for a model to write the port, verified against this module")
    source = Path(problem) if problem is not None else module
    if problem is not None and not source.is_file():
        raise AkgError(f"no such problem file: {problem}")
    if not {"get_inputs", "get_init_inputs"} <= _defines(source):
        raise AkgError(f"{source.name} defines no get_inputs()/get_init_inputs(): give the problem file "
                       "with --problem")
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    ref = out.with_name(f"{out.stem}_original.py")
    ref.write_text(REFERENCE.format(module=module.name, inputs=source.name, module_path=str(module.resolve()),
                                    problem_path=str(source.resolve()) if problem is not None else None))
    if "triton" not in text:
        assert model is not None
        return Port(ref, [], rewritten=rewrite(Job(module, ref, dsl, target, out), model, why_not_lifted(module),
                                               inputs_text(Path(problem) if problem else None), budget, timing))
    if not torch.cuda.is_available():  # the original runs under Triton's interpreter here: no baseline to time
        timing = False
    try:
        t = translate(ref, dsl, target, out, timing=timing)
    except AkgError as e:
        if model is None:
            raise AkgError(f"{e} (with --llm MODEL a model writes what akg cannot lift)") from None
        return Port(ref, [], rewritten=rewrite(Job(module, ref, dsl, target, out), model, str(e)[:300],
                                               inputs_text(Path(problem) if problem else None), budget, timing))
    return Port(ref, list(t.graph.meta.get("ported", [])), translation=t)


def why_not_lifted(module: Path) -> str:
    return f"{module.name} launches no Triton kernel"


def inputs_text(problem: Path | None) -> str:
    """Where the inputs come from, for a model's prompt (the module is not run to say it: a CUDA-C module
    compiles on import, and a replayed request must read the same everywhere)."""
    return "the module's own get_inputs()" if problem is None else \
        f"get_inputs() of the problem file {problem.name}:\n```python\n{problem.read_text()}\n```"
