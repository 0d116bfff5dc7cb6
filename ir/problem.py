"""Loading KernelBench-format problem files: `Model`, `get_inputs()`, `get_init_inputs()`."""

from __future__ import annotations

import importlib.util
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from .errors import AkgError
from .jax_lift import is_jax_problem


def _where(exc: BaseException, path: Path) -> str:
    """The deepest line of `path` in a traceback, as ' (at FILE:LINE)'."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if Path(f.filename) == path]
    return f" (at {path.name}:{frames[-1].lineno})" if frames else ""


def _first_line(exc: BaseException) -> str:
    msg = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {msg[0] if msg else ''}".rstrip(": ")


@dataclass
class Problem:
    path: Path
    module: ModuleType
    model_cls: type
    get_inputs: Callable[[], Any]
    get_init_inputs: Callable[[], Any]

    @property
    def name(self) -> str:
        return self.path.stem

    def build_model(self, seed: int = 0) -> torch.nn.Module:
        """The reference module with deterministic weights (same seed, same creation order)."""
        torch.manual_seed(seed)
        init = self._call(self.get_init_inputs, "get_init_inputs")
        try:
            return self.model_cls(*init)
        except Exception as e:  # noqa: BLE001 - any failure of user code is reported in one line
            raise AkgError(f"Model(*get_init_inputs()) in {self.path} raised {_first_line(e)}"
                           f"{_where(e, self.path)}; fix the problem file") from None

    def make_inputs(self, seed: int = 0, device: torch.device | str | None = None) -> list[Any]:
        """`device`: draw them there (gigabytes of inputs drawn on the host take seconds per trial);
        a get_inputs that cannot run under a device context is drawn on the host."""
        torch.manual_seed(seed)
        if device is not None and torch.device(device).type != "cpu":
            try:
                with torch.device(device):
                    return list(self.get_inputs())
            except Exception:  # noqa: BLE001 - the host draw below reports a real error
                torch.manual_seed(seed)
        return list(self._call(self.get_inputs, "get_inputs"))

    def fake_inputs(self) -> tuple[FakeTensorMode, list[Any]]:
        """Inputs with shapes and dtypes but no storage: lifting a problem whose inputs are
        gigabytes takes no memory."""
        mode = FakeTensorMode(allow_non_fake_inputs=True)
        with mode:
            return mode, list(self._call(self.get_inputs, "get_inputs"))

    def _call(self, fn: Callable[[], Any], what: str) -> Any:
        try:
            out = fn()
        except Exception as e:  # noqa: BLE001
            raise AkgError(f"{what}() in {self.path} raised {_first_line(e)}{_where(e, self.path)}; "
                           "fix the problem file") from None
        if not isinstance(out, (list, tuple)):
            raise AkgError(f"{what}() in {self.path} must return a list, got {type(out).__name__}")
        return out


def load_problem(path: str | Path) -> Problem:
    p = Path(path).resolve()
    if not p.is_file():
        raise AkgError(f"no such problem file: {path}")
    src = p.read_text()
    try:
        code = compile(src, str(p), "exec")
    except SyntaxError as e:
        raise AkgError(f"{p}:{e.lineno}: syntax error: {e.msg}; fix the problem file") from None
    name = f"akg_problem_{abs(hash(str(p)))}"
    spec = importlib.util.spec_from_loader(name, loader=None)
    assert spec is not None
    mod = importlib.util.module_from_spec(spec)
    mod.__file__ = str(p)
    sys.modules[name] = mod  # dataclasses and pickling look modules up by name
    depth = torch._C._functorch.get_dynamic_layer_stack_depth()
    try:
        exec(code, mod.__dict__)
    except Exception as e:  # noqa: BLE001
        # a file that raised inside torch.vmap left its layers pushed: a caller's torch.compile frame
        # would find the stack deeper than it left it (torch 2.11 asserts)
        torch._C._functorch.pop_dynamic_layer_stack_and_undo_to_depth(depth)
        raise AkgError(f"importing {p} raised {_first_line(e)}{_where(e, p)}; fix the problem file") from None
    missing = [n for n in ("Model", "get_inputs", "get_init_inputs") if not hasattr(mod, n)]
    if "Model" in missing and is_jax_problem(p):
        raise AkgError(f"{p.name} is a JAX program (model, get_params, get_inputs): `akg ir`, translate and verify "
                       "take it; tune and bench take PyTorch (KernelBench) problems only so far")
    if missing:
        raise AkgError(f"{p} defines no {', '.join(missing)}: a KernelBench problem needs class Model, "
                       "get_inputs() and get_init_inputs()")
    if not (isinstance(mod.Model, type) and issubclass(mod.Model, torch.nn.Module)):
        raise AkgError(f"{p}: Model must be a torch.nn.Module subclass")
    return Problem(p, mod, mod.Model, mod.get_inputs, mod.get_init_inputs)
