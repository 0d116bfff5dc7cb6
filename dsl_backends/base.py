"""The backend contract: a manifest, `render` (kernel IR -> source), `build` (source -> callable
module), the executor available for a target on this machine, and a tuning space."""

from __future__ import annotations

import importlib
import importlib.metadata
import tomllib
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Protocol

from hardware_models.spec import HardwareModel
from ir.errors import AkgError
from ir.kernel.ir import Kernel, KernelProgram

HERE = Path(__file__).parent


class UnsupportedKernel(Exception):
    """The backend cannot express this kernel; the planner falls back to a library call."""


@dataclass(frozen=True)
class Manifest:
    name: str
    description: str
    entry: str  # module:attribute of the Backend object
    # target kind ("gpu", "cpu", "tpu") or name -> executor used when that device is present
    targets: dict[str, str] = field(default_factory=dict)
    # executor used where the target's device is absent (interpreter, emulator, compile-only)
    fallback: str = "none"
    runtime: tuple[str, ...] = ()  # Python modules the written module imports
    checked_by: str = ""  # how the fallback executor checks a kernel, in words ("" = the executor's name)
    # kernel kinds it renders; "rownorm" (a row template) asks the planner for row fusion
    kinds: tuple[str, ...] = ("pointwise", "reduce", "matmul")

    @staticmethod
    def load(path: Path) -> Manifest:
        d = tomllib.loads(path.read_text())
        return Manifest(d["name"], d["description"], d["entry"], dict(d.get("targets", {})),
                        d.get("fallback", "none"), tuple(d.get("runtime", ())), d.get("checked_by", ""),
                        tuple(d.get("kinds", ("pointwise", "reduce", "matmul"))))

    def missing_runtime(self) -> list[str]:
        """The Python packages a written module imports that this interpreter cannot find."""
        import importlib.util

        return [m for m in self.runtime if importlib.util.find_spec(m) is None]

    def supports(self, target: HardwareModel) -> bool:
        return target.name in self.targets or target.kind in self.targets

    def executor(self, target: HardwareModel, device_present: bool) -> str:
        """How a kernel for `target` can run here: native, interpreter, emulator, compile-only, none."""
        if not self.supports(target):
            return "none"
        native = self.targets.get(target.name, self.targets.get(target.kind, "native"))
        return native if device_present else self.fallback


class Backend(Protocol):
    manifest: Manifest

    def render_kernel(self, k: Kernel, target: HardwareModel) -> str: ...

    def render_module(self, prog: KernelProgram, target: HardwareModel, header: str,
                      meta: dict[str, Any]) -> str: ...

    def tuning_space(self, k: Kernel, target: HardwareModel) -> list[dict[str, Any]]: ...

    def default_schedule(self, k: Kernel, target: HardwareModel, executor: str) -> dict[str, Any]: ...


@lru_cache(maxsize=1)
def _manifests() -> dict[str, Manifest]:
    found = {p.parent.name.replace("_", "-"): Manifest.load(p) for p in sorted(HERE.glob("*/manifest.toml"))}
    found = {m.name: m for m in found.values()}
    for ep in importlib.metadata.entry_points(group="akg.backends"):
        try:
            obj = ep.load()
        except Exception:  # noqa: BLE001 - a broken third-party backend must not break akg
            continue
        m = getattr(obj, "manifest", None)
        if isinstance(m, Manifest):
            found.setdefault(m.name, m)
    return found


def available() -> dict[str, Manifest]:
    return dict(_manifests())


def get_backend(name: str) -> Backend:
    m = _manifests().get(name)
    if m is None:
        raise AkgError(f"unknown DSL {name!r}; available: {', '.join(sorted(_manifests()))}")
    mod, attr = m.entry.split(":")
    return getattr(importlib.import_module(mod), attr)
