"""The backend contract: a manifest (what the core needs to know: targets, executors, kernel kinds,
sandbox environment, versioned packages), schedules (default and tuning space), rendering (kernel IR
and a schedule -> source; a program -> a module), and compiling without running where that is all a
machine can do."""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import os
import re
import tempfile
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from functools import lru_cache
from pathlib import Path
from typing import Any, NamedTuple, Protocol

from hardware_models.cost import SPLIT_PRODUCTS, Tiling
from hardware_models.spec import HardwareModel
from ir.errors import AkgError, UnsupportedKernel
from ir.kernel.ir import Buf, Kernel, KernelProgram
from ir.kernel.schedule import Schedule, Schedules

from .chain import Chain
from .module import Bucket, write_module

HERE = Path(__file__).parent


@dataclass(frozen=True)
class Capabilities:
    """What a backend's kernels can do beyond the kinds they render, as typed fields (tinygrad's `Renderer`
    attributes are the model); the manifest's `[capabilities]` table states them."""

    siblings: bool = False  # its reduce templates store a kernel's `also` outputs (ir.kernel.siblings)
    pointwise_also: bool = False  # its pointwise templates store `also` outputs (ir.kernel.merge)
    # a GEMM reads a transposed view of an input in place where its elements are at most this many bytes
    # (8: its GEMM packs both operands; 2: its tensor-core tiles load 16-bit operands transposed; 0: copied)
    transposed_bytes: int = 0
    # its row kernel reads a row element by element: a row across a strided axis stays split (the split
    # kernels vectorise along the contiguous axis)
    contiguous_rows: bool = False
    in_place: bool = False  # a pointwise kernel may store over a dead operand it reads at its own coordinates
    # its split-precision (3xTF32) GEMM reads B fastest K-major: an fp32 matmul's row-major B is transposed
    # once first where the target has TF32 tensor cores (ir.passes.layout)
    gemm_b_k_major: bool = False
    dynamic: bool = False  # its kernels take run-time sizes (`ir.sym`) as arguments: --dynamic
    # its printer's names bind expressions, not values (TIR trees): a node read twice is built twice, so a
    # compare-and-select chain (a small arg reduction, unrolled) would grow exponentially: it keeps its template
    inlined_values: bool = False


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
    # kernel kinds it renders (its templates); "rownorm" (a row template) asks the planner for row fusion
    kinds: tuple[str, ...] = ("pointwise", "reduce", "matmul")
    capabilities: Capabilities = Capabilities()
    # packages whose versions are part of a tuning measurement's key (its compiler, its runtime)
    versioned: tuple[str, ...] = ()
    # environment of the verifier's sandbox ("{run_dir}" is the job's directory); `env_cpu` only where
    # a job runs on the CPU (interpreters read theirs there)
    env: dict[str, str] = field(default_factory=dict)
    env_cpu: dict[str, str] = field(default_factory=dict)
    # torch device types a written module accepts inputs on (the CPU where an interpreter runs it)
    devices: tuple[str, ...] = ("cpu",)
    # order among backends that run natively on the same target when the user names none (lower first)
    preference: int = 50
    checked_on: dict[str, str] = field(default_factory=dict)  # target kind -> `checked_by` for that kind
    # modules the verifier's fork server for CPU jobs imports once for all of them (each must import
    # without starting a thread or touching a device: the server forks afterwards)
    preload_cpu: tuple[str, ...] = ()
    # "module:function" the verifier's worker calls on a device job before the first trial, as
    # f(module, model, make_inputs) -> dict | None: a JIT DSL compiling the candidate's kernels at once (the
    # dict goes into the verdict's details; None: the candidate holds none of this DSL's kernels)
    precompile: str = ""
    # "module:function" translate calls in a thread before a verification that keeps its build, as
    # f(module_source, build_dir): the module's library built there as its import in the worker would build
    # it (nothing of the module is run or loaded), while the verifier's fork server still imports
    prebuild: str = ""
    # target kind -> its generated GEMM's fraction of the compute peak (measured); where the target states
    # its library's too, an untuned plan leaves GEMMs to whichever the cost model finds faster
    gemm_efficiency: dict[str, float] = field(default_factory=dict)

    @staticmethod
    def load(path: Path) -> Manifest:
        d = tomllib.loads(path.read_text())
        caps = d.get("capabilities", {})
        known = {f.name for f in fields(Capabilities)}
        if set(caps) - known:
            raise AkgError(f"{path}: unknown capabilities {', '.join(sorted(set(caps) - known))}; "
                           f"known: {', '.join(sorted(known))}")
        listed = lambda key, default=(): tuple(d.get(key, default))  # noqa: E731 - a table's lists as tuples
        return Manifest(name=d["name"], description=d["description"], entry=d["entry"],
                        targets=dict(d.get("targets", {})), fallback=d.get("fallback", "none"),
                        runtime=listed("runtime"), checked_by=d.get("checked_by", ""),
                        kinds=listed("kinds", ("pointwise", "reduce", "matmul")),
                        capabilities=Capabilities(**caps), versioned=listed("versioned"),
                        env=dict(d.get("env", {})), env_cpu=dict(d.get("env_cpu", {})),
                        devices=listed("devices", ("cpu",)), preference=int(d.get("preference", 50)),
                        checked_on=dict(d.get("checked_on", {})), preload_cpu=listed("preload_cpu"),
                        precompile=d.get("precompile", ""), prebuild=d.get("prebuild", ""),
                        gemm_efficiency={k: float(v) for k, v in d.get("gemm_efficiency", {}).items()})

    def missing_runtime(self) -> list[str]:
        """The Python packages a written module imports that this interpreter cannot find."""
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
    """What the core calls on a backend (checked against every backend by a test)."""

    manifest: Manifest
    overrides: frozenset[str]  # composite ops its op table spells itself (the rest arrive expanded)

    def default_schedule(self, k: Kernel, target: HardwareModel) -> Schedule: ...

    def tiling(self, s: Schedule) -> Tiling | None: ...

    def tuning_space(self, k: Kernel, target: HardwareModel) -> list[Schedule]: ...

    def render_kernel(self, k: Kernel, schedule: Schedule, target: HardwareModel) -> str: ...

    def launch(self, k: Kernel, schedule: Schedule, ref: Callable[[Buf | None], str]) -> list[str]: ...

    def render_module(self, prog: KernelProgram, schedules: Schedules, target: HardwareModel,
                      meta: dict[str, Any], weights: dict[str, Any], buckets: Sequence[Bucket] = ()) -> str:
        """The module's text without its header (the core prepends it). `buckets` (--dynamic): programs
        scheduled for smaller sizes, dispatched on the run-time size."""
        ...

    def compile_only(self, prog: KernelProgram, schedules: Schedules, target: HardwareModel) -> str:
        """Where the target's device is absent but its compiler is here: compile every kernel, run
        none; the line the report shows. Backends without such an executor raise UnsupportedKernel."""
        ...

    def stores_siblings(self, target: HardwareModel) -> bool:
        """Whether its reduce templates for `target` store a kernel's `also` outputs (ir.kernel.siblings)."""
        ...

    def fuses_rows(self, target: HardwareModel) -> bool:
        """Whether it writes a normalisation as one row kernel (a "rownorm" template) for `target`."""
        ...


def _manifest_files() -> list[Path]:
    """This package's backends, then those in the folders of AKG_BACKEND_PATH (a backend out of tree:
    a folder with a manifest whose entry is importable)."""
    dirs = [HERE] + [Path(d) for d in os.environ.get("AKG_BACKEND_PATH", "").split(os.pathsep) if d]
    return [p for d in dirs for p in sorted(d.glob("*/manifest.toml"))]


@lru_cache(maxsize=1)
def _manifests() -> dict[str, Manifest]:
    found: dict[str, Manifest] = {}
    for path in _manifest_files():
        m = Manifest.load(path)
        found.setdefault(m.name, m)
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


class Requires(NamedTuple):
    """The GPU a module's kernels need: compute capability at least `capability` (of the same major
    where `same_major`: a cubin built for sm_90a runs on 9.0 only), and why."""
    capability: tuple[int, int]
    why: str
    same_major: bool = False


class Frame(NamedTuple):
    imports: list[str]
    prelude: str
    sources: dict[str, str]
    requires: Requires | None = None  # checked on the inputs' GPU before any launch


Ref = Callable[[Buf | None], str]  # a buffer's name in the written module's forward


def _no_schedule(k: Kernel, target: HardwareModel) -> Schedule:
    return Schedule()


def _one_schedule(k: Kernel, target: HardwareModel) -> list[Schedule]:
    return [Schedule()]


@dataclass(frozen=True)
class Template:
    """How a backend writes one kind of kernel (pointwise, reduce, rownorm, matmul, scan): its source
    for a schedule, the lines of `forward` that launch it, its default schedule and its tuning space."""

    render: Callable[[Kernel, Schedule, HardwareModel], str]
    launch: Callable[[Kernel, Schedule, Ref], list[str]]
    default: Callable[[Kernel, HardwareModel], Schedule] = _no_schedule
    space: Callable[[Kernel, HardwareModel], list[Schedule]] = _one_schedule


class BackendBase:
    """A backend as a table of templates by kernel kind; the core's calls dispatch through it. A
    backend adds `render_module` (how a module is framed: imports, build, prelude) and, where it has
    a compiler but no device here, `compile_only`."""

    manifest: Manifest
    overrides: frozenset[str] = frozenset()  # composites its op table spells itself
    templates: Mapping[str, Template] = {}

    def stores_siblings(self, target: HardwareModel) -> bool:
        return self.manifest.capabilities.siblings

    def fuses_rows(self, target: HardwareModel) -> bool:
        """Whether a normalisation becomes one row kernel (its "rownorm" template) for this target."""
        return "rownorm" in self.manifest.kinds

    def template(self, k: Kernel) -> Template:
        t = self.templates.get(k.kind)
        if t is None:
            raise UnsupportedKernel(f"the {self.manifest.name} backend has no {k.kind} template")
        return t

    def default_schedule(self, k: Kernel, target: HardwareModel) -> Schedule:
        return self.template(k).default(k, target)

    def tiling(self, s: Schedule) -> Tiling | None:
        """A GEMM schedule in the cost model's terms (tile, warps, stages, split precision), None where it
        names no tile. Here Triton's keys (BM, BN, BK, num_warps, num_stages, input_precision); a backend
        whose schedules say it otherwise states its own."""
        if "BM" not in s or "BN" not in s or "BK" not in s:
            return None
        return gpu_tiling(s, s.get("num_warps", 4))

    def tuning_space(self, k: Kernel, target: HardwareModel) -> list[Schedule]:
        return self.template(k).space(k, target)

    def render_kernel(self, k: Kernel, schedule: Schedule, target: HardwareModel) -> str:
        return self.template(k).render(k, schedule, target)

    def launch(self, k: Kernel, schedule: Schedule, ref: Ref) -> list[str]:
        return self.template(k).launch(k, schedule, ref)

    def render_module(self, prog: KernelProgram, schedules: Schedules, target: HardwareModel,
                      meta: dict[str, Any], weights: dict[str, Any], buckets: Sequence[Bucket] = ()) -> str:
        # every bucket's kernels (named apart) live in one source; the frame sees them as one program
        every = [*(s for _, p, _ in buckets for s in p.kernels()), *prog.kernels()]
        merged = {k: v for _, _, sch in buckets for k, v in sch.items()} | dict(schedules)
        sources = {k.name: self.render_kernel(k, merged[k.name], target) for k in every}
        for p, s in [(prog, schedules), *((bp, bs) for _, bp, bs in buckets)]:
            sources.update((c.name, self.render_chain(c, p, sources)) for c in self.chains(p, s))
        f = self.frame(replace(prog, steps=every), merged, target, sources)
        return write_module(prog, schedules, meta, f, self, weights, buckets)

    def chains(self, prog: KernelProgram, schedules: Schedules) -> list[Chain]:
        """Runs of `prog`'s kernels the module calls once each (`dsl_backends.chain`): none unless the
        backend joins them (a host language whose calls cost more from Python than from itself)."""
        return []

    def render_chain(self, chain: Chain, prog: KernelProgram, sources: Mapping[str, str]) -> str:
        raise UnsupportedKernel(f"the {self.manifest.name} backend joins no kernels into one call")

    def frame(self, prog: KernelProgram, schedules: Schedules, target: HardwareModel,
              sources: dict[str, str]) -> Frame:
        """How the module holds the rendered kernels: its imports, its prelude (a build step, helpers)
        and the sources placed as they are (a compiled DSL puts them in its prelude instead)."""
        return Frame([], "", sources)

    def compile_only(self, prog: KernelProgram, schedules: Schedules, target: HardwareModel) -> str:
        raise UnsupportedKernel(f"the {self.manifest.name} backend has no compile-only executor")


def sandbox_env(run_dir: Path, on_cpu: bool, build_dir: Path | None = None) -> dict[str, str]:
    """Every backend's sandbox environment (the verifier does not know which DSL a module uses).
    `{run_dir}` in a manifest's value is the run's own folder; `{build_dir}` is where compiled code may
    outlive the run (the candidate's build cache, when the caller keeps one; else the run's folder)."""
    env: dict[str, str] = {}
    for m in _manifests().values():
        for k, v in {**m.env, **(m.env_cpu if on_cpu else {})}.items():
            env[k] = v.format(run_dir=run_dir, build_dir=build_dir or run_dir)
    return env


def build_env(build_dir: Path) -> dict[str, str]:
    """Where a module finds the compiled code a verifier's run kept in `build_dir` (its build cache): the
    manifests' variables that name the build folder, and akg's own cache root (the C-family modules' builds)."""
    env = {k: v.format(run_dir=build_dir, build_dir=build_dir) for m in _manifests().values()
           for k, v in m.env.items() if "{build_dir}" in v}
    return env | {"AKG_CACHE_DIR": str(build_dir)}


def import_env(on_cpu: bool) -> dict[str, str]:
    """What the manifests set for CPU runs (where on_cpu), which a module may read when it is imported:
    the verifier's fork server is started with it, as its CPU jobs will run."""
    if not on_cpu:
        return {}
    tmp = tempfile.gettempdir()
    return {k: v.format(run_dir=tmp, build_dir=tmp) for m in _manifests().values() for k, v in m.env_cpu.items()}


def preload(on_cpu: bool, dsl: str | None = None) -> list[str]:
    """What the manifests (`dsl`'s alone, where named) ask the verifier's fork server to import once (for CPU
    jobs only)."""
    if not on_cpu:
        return []
    mans = _manifests()
    chosen = list(mans.values()) if dsl is None else [mans[dsl]] if dsl in mans else []
    return sorted({m for man in chosen for m in man.preload_cpu})


def preload_for_source(text: str) -> list[str]:
    """The CPU preloads of the backends whose packages a module's source imports: a C++ or Triton module
    imports neither TileLang nor JAX, and its fork server need not import them (about 2 s of a first call)."""
    out: set[str] = set()
    for man in _manifests().values():
        tops = sorted({m.split(".")[0] for m in man.preload_cpu})
        if tops and re.search(rf"^\s*(?:import|from)\s+(?:{'|'.join(map(re.escape, tops))})\b", text, re.M):
            out |= set(man.preload_cpu)
    return sorted(out)


def precompilers() -> list[tuple[str, str]]:
    """(DSL, "module:function") for each manifest that compiles a candidate's kernels before its trials."""
    return sorted((name, m.precompile) for name, m in _manifests().items() if m.precompile)


def dsls_for(target: HardwareModel) -> list[str]:
    """The DSLs whose manifests target this chip (hardware models do not list DSLs)."""
    return sorted(name for name, m in _manifests().items() if m.supports(target))


def default_dsl(target: HardwareModel) -> str:
    """The DSL used where the user names none: of those that run natively on `target`, the manifest's
    preference, then the name."""
    native = [(m.preference, name) for name, m in _manifests().items() if m.executor(target, True) == "native"]
    if not native:
        raise AkgError(f"no backend runs natively on {target.name}: name a DSL")
    return min(native)[1]


def hook(spec: str) -> Any:
    """What a manifest's "module:attribute" names (its entry, its precompile and prebuild hooks), imported."""
    mod, attr = spec.split(":")
    return getattr(importlib.import_module(mod), attr)


def get_backend(name: str) -> Backend:
    m = _manifests().get(name)
    if m is None:
        raise AkgError(f"unknown DSL {name!r}; available: {', '.join(sorted(_manifests()))}")
    try:
        return hook(m.entry)
    except (ImportError, AttributeError) as e:
        raise AkgError(f"the {name} backend's entry {m.entry} cannot be loaded ({e}): put the package that "
                       "holds it on PYTHONPATH, or install it") from None


def gpu_tiling(s: Schedule, warps: int) -> Tiling:
    """A GPU GEMM schedule's tile (BM, BN, BK) over `warps` warps, its stages, split precision and grouped
    launch order (GROUP_M)."""
    prec = s.get("input_precision", "")
    return Tiling(block=(s["BM"], s["BN"], s["BK"]), num_warps=max(1, int(warps)), num_stages=s.get("num_stages", 1),
                  precision=prec if prec in SPLIT_PRODUCTS else "", group_m=int(s.get("GROUP_M", 1)))
