"""The offline pipeline behind `akg translate` (the rules engine; no LLM, no network):
lift -> simplify -> decompose -> fuse -> plan -> lower to kernel IR -> render -> verify -> write."""

from __future__ import annotations

import hashlib
import tempfile
import threading
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

from dsl_backends import Backend, UnsupportedKernel, available, get_backend, hook
from dsl_backends.jax_bridge import jax_entry
from dsl_backends.module import Bucket, with_header
from hardware_models.cost import SPLIT_PRODUCTS
from hardware_models.counting import necessary_ops
from hardware_models.spec import HardwareModel
from ir.dynamic import bucket_bounds
from ir.errors import AkgError
from ir.graph import Graph
from ir.jax_lift import JaxProblem, is_jax_problem, lift_jax, load_jax_problem
from ir.kernel.analysis import work
from ir.kernel.expand import expand_program
from ir.kernel.flatten import flatten_program
from ir.kernel.implicit import masked_taps
from ir.kernel.inplace import in_place_program
from ir.kernel.ir import Kernel, KernelProgram, LibraryCall
from ir.kernel.lower import LoweringError, conv_kinds, lower
from ir.kernel.merge import merge_pointwise
from ir.kernel.schedule import Schedule, Schedules
from ir.kernel.siblings import merge_siblings
from ir.kernel.unroll import unroll_program
from ir.lift import lift
from ir.passes import run_passes
from ir.passes.fusion import FusionPlan, Group
from ir.passes.library import VIEW_OPS, check_families, families_of
from ir.problem import load_problem

from .library_check import measured_choice
from .plan_options import PlanOptions, pipeline_for
from .ranking import ranked_space
from .strategy import CONV_STRATEGIES, Strategy, has_long_recurrence, untuned_strategy
from .translation import Translation
from .tuning_db import (
    TuningDB,
    best_schedule,
    best_strategy,
    hardware_key,
    kernel_signature,
    problem_signature,
    versions,
)
from .verifier import CheckOptions, Verdict, model_of, prestart_for, verify
from .verifier.sizes import dynamic_sizes

COST_GATE = 64  # a kernel may do at most this many times the work its group needs (suite: 18x at most)


def cost_gate(prog: KernelProgram, groups: dict[int, Group], name: str) -> None:
    """Refuses a kernel that would do far more work than its group needs (values recomputed per
    element), before anything is rendered or run."""
    for k in prog.kernels():
        grp = groups.get(k.group)
        if grp is None:
            continue
        need, done = max(necessary_ops(grp.nodes, grp.outputs), k.out.numel), work(k)
        need *= max((masked_taps(n) for n in grp.nodes), default=1)  # masked by design, not recomputed
        if done > COST_GATE * need:
            raise AkgError(f"the plan for {name} makes kernel {k.name} do {done:.3g} operations where its group "
                           f"needs {need:.3g} (over {COST_GATE}x: values recomputed per element); refused before "
                           "rendering: report it with the problem file")


def device_present(target: HardwareModel) -> bool:
    if target.kind == "cpu":
        return True
    if target.kind == "gpu" and target.vendor in ("nvidia", "amd"):
        import torch

        return torch.cuda.is_available()
    return False


def choose_schedule(backend: Backend, k: Kernel, grp: Group | None, target: HardwareModel) -> Schedule:
    """The backend's default, or for GPU GEMMs the cost model's best of the tuning space. Chosen for the
    target alone: a module written where its device is absent (checked by an interpreter or emulator)
    carries the schedule its device runs."""
    sched = backend.default_schedule(k, target)
    if k.kind == "matmul" and grp is not None and target.kind == "gpu":
        ranked = ranked_space(backend, k, grp, target)
        if ranked:
            sched = ranked[0]
    return sched


def tuned_schedules(backend: Backend, prog: KernelProgram, schedules: dict[str, Schedule], target: HardwareModel,
                    dsl: str, problem: Path) -> tuple[dict[str, Schedule], dict[str, float]]:
    """Each kernel's best schedule measured on this hardware (`akg tune`), where the tuning database has
    one for these versions; the rest keep theirs. Also: kernel -> the measured module time."""
    path, hw, ver = TuningDB.default_path(), hardware_key(target), versions(backend.manifest)
    out, times = dict(schedules), {}
    if not path.is_file():  # never tuned here: no kernel rendered for a signature
        return out, times
    problem_sig = problem_signature(problem)
    for k in prog.kernels():
        found = best_schedule(path, hw, dsl, kernel_signature(problem_sig, k), ver)
        if found is not None:
            out[k.name], times[k.name] = found
    return out, times


def _grouped(s: LibraryCall) -> str:
    """A convolution's channel groups where they are why it stays a library call."""
    groups = int(s.attrs.get("groups", 1) or 1)
    return f" with groups={groups}" if groups > 1 else ""


def build(problem_path: str | Path, dsl: str, target_name: str | HardwareModel, options: PlanOptions | None = None,
          **changes: Any) -> Translation:
    """The problem planned, lowered and scheduled for `dsl` on the target as `options` (`PlanOptions`, with
    `changes`: its fields by keyword) ask; rendered and verified by `translate`."""
    opts = replace(options or PlanOptions(), **changes)
    train, conv, pure = opts.train, opts.conv, opts.pure
    tuned, rows, dynamic, library = opts.tuned, opts.rows, opts.dynamic, opts.library
    backend = get_backend(dsl)
    library = check_families(library)
    if pure and library:
        raise AkgError(f"--pure generates every group: drop --library {','.join(library)} or --pure")
    if conv not in CONV_STRATEGIES:
        raise AkgError(f"unknown convolution strategy {conv!r}: choose {', '.join(CONV_STRATEGIES)}")
    if conv != "library" and not conv_kinds(backend.manifest.kinds) & ({"dwconv"} if conv == "depthwise" else
                                                                      {"conv", "dwconv"}):
        raise AkgError(f"the {dsl} backend does not generate {'depthwise ' if conv == 'depthwise' else ''}"
                       "convolutions: use --conv library")
    target = model_of(target_name)  # a command's target arrives loaded; a name is loaded here, once
    target_name = target.name
    if not backend.manifest.supports(target):
        raise AkgError(f"the {dsl} backend does not target {target_name} ({target.kind}); "
                       f"it targets {', '.join(backend.manifest.targets)}")
    executor = backend.manifest.executor(target, device_present(target))
    missing = backend.manifest.missing_runtime() if executor in ("native", "interpreter", "emulator") else []
    if missing:  # the kernels could not run here: say so before any work
        raise AkgError(f"the {dsl} backend needs the Python package {', '.join(missing)} to run its kernels here: "
                       f"install it (make setup, or pip install 'akg[{dsl}]')")
    if dynamic and not backend.manifest.capabilities.dynamic:
        takes = ", ".join(sorted(n for n, m in available().items() if m.capabilities.dynamic))
        raise AkgError(f"the {dsl} backend does not take run-time sizes yet (--dynamic): translate without "
                       f"--dynamic for get_inputs()' sizes, or use a backend that does ({takes})")
    problem = load_jax_problem(problem_path) if is_jax_problem(Path(problem_path)) else load_problem(problem_path)
    if isinstance(problem, JaxProblem) and (train or dynamic):
        raise AkgError(f"{problem.path.name} is a JAX program: translate it without --train and --dynamic "
                       "(not taken for JAX programs yet)")
    strategy_s = None
    if tuned and executor == "native" and (conv, rows, library) == ("library", True, ()) and not pure:
        found = best_strategy(TuningDB.default_path(), hardware_key(target), dsl, problem_signature(problem.path),
                              versions(backend.manifest))
        if found is not None:
            best = Strategy.from_json(found[0])
            (conv, rows, library), strategy_s = (best.conv, best.rows, best.library), found[1]
    how = Strategy(rows, conv, library)
    opts = replace(opts, library=library)  # checked
    lifted = _lift(problem, opts)  # once: a second strategy is planned from a copy (a lift is seconds)
    g, plan, prog, schedules = _lowered(problem, backend, target, how, opts, lifted.copy())
    strategy_why = ""
    if tuned and strategy_s is None and how == Strategy() and not pure:
        untuned, strategy_why = untuned_strategy(plan, backend, target, g, tf32=opts.tf32_convs,
                                                   replayed=opts.graph_replay)
        if untuned != how:  # nothing measured here yet: the cost model's choice
            how = untuned
            g, plan, prog, schedules = _lowered(problem, backend, target, how, opts, lifted)
    buckets = _buckets(problem, backend, target, how, opts, (g, prog, schedules))
    times: dict[str, float] = {}
    if tuned and executor == "native":  # measurements of another machine's device say nothing here
        schedules, times = tuned_schedules(backend, prog, schedules, target, dsl, problem.path)
    return Translation(problem.path, dsl, target, executor, g, plan, prog, schedules, tuned=times,
                       strategy=how, strategy_s=strategy_s, strategy_why=strategy_why, buckets=buckets)


def _lift(problem: Any, opts: PlanOptions, at: tuple[str, int] | None = None) -> Graph:
    """The problem as a graph; `at`: trace a --dynamic size at this value (a bucket's largest) instead of
    its bound."""
    return lift_jax(problem) if isinstance(problem, JaxProblem) else \
        lift(problem, train=opts.train, allow_opaque=opts.allow_opaque, dynamic=opts.dynamic, dynamic_at=at)


def _lowered(problem: Any, backend: Backend, target: HardwareModel, how: Strategy, opts: PlanOptions,
             g: Graph) -> tuple[Graph, FusionPlan, KernelProgram, Schedules]:
    """The lifted graph `g` (changed in place) rewritten, fused, lowered to kernels in primitives and
    scheduled by the cost model."""
    pure = opts.pure
    lifted = {n.op for n in g.nodes}
    keep = ("recurrence",) if not pure and has_long_recurrence(g, target) else ()
    first, rest = pipeline_for(backend, target, how, pure, keep).split(1)  # the rest for what else it reads
    run_passes(g, first)  # simplify: the rewrites may make a family's op (a global pool becomes a mean)
    # what a tune may leave to the library: the ops before decomposition (whose reductions are the composites')
    g.meta["library_families"] = families_of(lifted | {n.op for n in g.nodes})
    run_passes(g, rest)
    plan = g.plan
    try:
        kinds = set(backend.manifest.kinds)
        convs = conv_kinds(kinds) if how.conv == "generated" or pure else \
            conv_kinds(kinds) & {"dwconv"} if how.conv == "depthwise" else set()
        generated = convs | ({"window", "scan"} & kinds)
        prog = lower(g, plan, frozenset(generated))
    except LoweringError as e:
        raise AkgError(f"cannot lower {problem.path.name}: {e}") from None
    # random draws stay torch's generator, so the numbers match the reference's; a view computes nothing
    libs = [s for s in prog.library_calls() if s.op != "random" and s.op not in VIEW_OPS] if pure else []
    if libs:
        what = ", ".join(f"{s.op}{_grouped(s)} (group {s.group})" for s in libs[:4]) + (" ..." if len(libs) > 4 else "")
        raise AkgError(f"--pure: the {backend.manifest.name} backend generates no kernel for {what} in "
                       f"{problem.path.name}; drop --pure to keep them as declared library calls")
    prog = expand_program(prog, backend.overrides)  # composites in primitives, once, for every renderer
    # small windows (pooling) as pointwise kernels; (H, W) as one axis
    prog = flatten_program(unroll_program(prog, chains=not backend.manifest.capabilities.inlined_values))
    if backend.stores_siblings(target):  # a value another kernel computes on the way is stored by it (one read)
        prog = replace(prog, steps=merge_siblings(prog.steps))
    groups = {grp.id: grp for grp in plan.groups}
    cost_gate(prog, groups, problem.path.name)
    if backend.manifest.capabilities.pointwise_also:  # pointwise kernels of one shape as one, several outputs
        kept = {b.name for b in prog.outputs} | set(prog.aliases.values())
        prog = replace(prog, steps=merge_pointwise(prog.steps, kept))
    if backend.manifest.capabilities.in_place:  # an epilogue stores over the dead GEMM or conv output it reads
        prog = in_place_program(prog)
    schedules = {k.name: choose_schedule(backend, k, groups.get(k.group), target) for k in prog.kernels()}
    return g, plan, prog, schedules


def _buckets(problem: Any, backend: Backend, target: HardwareModel, how: Strategy, opts: PlanOptions,
             top: tuple[Graph, KernelProgram, Schedules]) -> list[Bucket]:
    """--dynamic with one size: the program lowered and scheduled again for each smaller bucket (sizes
    up to 16, 64, 256, ... below the bound), its kernels named apart; the module dispatches on the size.
    Only buckets whose kernels or schedules differ from the next larger one's (`top`: the bound's graph,
    program and schedules) are kept."""
    g, top_prog, top_schedules = top
    dyn = g.meta.get("dynamic") or {}
    if len(dyn) != 1 or (opts.dynamic or "").strip() == "auto":  # one named size: the buckets split its range
        return []
    name = next(iter(dyn))
    def signature(p: KernelProgram, sch: Schedules) -> tuple:
        return tuple((k.name, k.kind, sch[k.name]) for k in p.kernels())

    out: list[Bucket] = []
    serving = signature(top_prog, top_schedules)  # the code that would serve these sizes without this bucket
    bounds = bucket_bounds(dyn[name]["traced"])[:-1]
    for i, upper in reversed(list(enumerate(bounds))):
        _, _, bprog, bsched = _lowered(problem, backend, target, how, opts, _lift(problem, opts, (name, upper)))
        if signature(bprog, bsched) == serving:
            continue
        serving = signature(bprog, bsched)
        renamed = {k.name: replace(k, name=f"{k.name}_b{i}") for k in bprog.kernels()}
        steps = [renamed.get(s.name, s) if isinstance(s, Kernel) else s for s in bprog.steps]
        out.insert(0, (upper, replace(bprog, steps=steps), {renamed[n].name: v for n, v in bsched.items()}))
    return out


def numerics_line(t: Translation) -> str:
    """How fp32 is computed, and (once verified) the module's error against float64 beside torch's own."""
    split = sorted({str(s["input_precision"]) for s in t.schedules.values()
                    if s.get("input_precision") in SPLIT_PRODUCTS})
    verified = t.verdict is not None and t.verdict.accepted
    line = ("numerics: fp32 kept in fp32 (no TF32)" if not split else
            f"numerics: fp32 contractions as {', '.join(split)} (split precision on tensor cores), " +
            ("allowed because the verifier found them within fp32 tolerance of float64" if verified else
             "not verified here (allowed only where the verifier finds them within fp32 tolerance)"))
    trials = [r for r in (t.verdict.details.get("trials", []) if t.verdict else []) if r.get("vs_float64")]
    if trials:
        line += (f"; max error vs float64: {max(r['max_abs_err'] for r in trials):.3g} "
                 f"(torch's own: {max(r['ref_max_abs_err'] for r in trials):.3g})")
    return line + "; modules are evaluated in eval mode"


def header(t: Translation, timing: dict[str, Any] | None = None) -> str:
    entry = ("model(params, *inputs), drop-in for the JAX model (its kernels in ModelNew)"
             if "jax_params" in t.graph.meta else "ModelNew, drop-in for Model")
    lines = [f"Generated by akg translate from {t.problem.name}: {entry}.",
             f"target: {t.target.name} ({t.target.description}); dsl: {t.dsl}; executor here: {t.executor}",
             numerics_line(t),
             f"strategy: {t.strategy.describe()}" + (f" (the tuning database's fastest, {t.strategy_s * 1e3:.4g} ms "
                                                      "at the tune's first eager pace)" if t.strategy_s is not None
                                                      else f" ({t.strategy_why})" if t.strategy_why else ""),
             *(f"note: {n}" for n in t.notes), "plan:"]
    dyn = t.graph.meta.get("dynamic")
    if dyn:
        if t.buckets:
            dyn = {k: dict(v, buckets=[u for u, _, _ in t.buckets]) for k, v in dyn.items()}
        at = sorted({*dynamic_sizes(dyn), max(v["traced"] for v in dyn.values())})
        lines.insert(-1, "sizes: " + ", ".join(f"{k} from 1 to {v['traced']}" for k, v in dyn.items()) +
                     " at run time (--dynamic); the verifier runs it at " +
                     ", ".join(map(str, at)) + " (each clipped to its bound)" +
                     ("" if not t.buckets else "; schedules chosen per size bucket, up to " +
                      ", ".join(str(u) for u, _, _ in t.buckets) + f" and {at[-1]}"))
    for k in t.program.kernels():
        sched = t.schedules[k.name].describe()
        why = (f"; schedule from the tuning database: {t.tuned[k.name] * 1e3:.4g} ms module time measured"
               if k.name in t.tuned else "")
        also = f"; also stores {', '.join(b.name for b, _ in k.also)}" if k.also else \
            f"; stores over {k.in_place} in place" if k.in_place else ""
        lines.append(f"  {k.name}: generated {k.kind} kernel (group {k.group}) [{sched}]{why}{also}")
    for s in t.program.library_calls():
        lines.append(f"  {s.name}: library call torch {s.op} (declared in AKG_LIBRARY_CALLS; group {s.group})")
    if t.verdict is not None:
        lines.append(f"verification: {t.verdict.line()} (on {t.verdict.details.get('device', '?')})")
    elif t.compiled:
        lines.append(f"verification: NOT verified: {t.compiled} (no {t.target.name} here)")
    else:  # a line either way: the kernels keep their line numbers, which Triton's cache key holds
        lines.append("verification: not run")
    if timing:
        cand = timing.get("candidate", {}).get("median_s")
        parts = [f"{name} {r['median_s'] / cand:.3g}x" for name, r in timing.items()
                 if name != "candidate" and r.get("median_s") and cand]
        at = t.verdict.details.get("timed_at") if t.verdict is not None else None
        where = f" at {', '.join(f'{k}={v}' for k, v in at.items())}" if at else ""
        lines.append(f"measured{where}: {cand * 1e3:.4g} ms; speedup " + ", ".join(parts))
    else:
        how = get_backend(t.dsl).manifest.checked_on.get(t.target.kind)
        lines.append("measured: not timed" + ("" if t.executor == "native" else f" (no {t.target.name} here" +
                                              (f": {how})" if how else ")")))
    return "\n".join(lines)


def compile_only(t: Translation) -> str:
    """Where the target's device is absent but its compiler is here: compile every kernel, run none."""
    backend = get_backend(t.dsl)
    try:
        return backend.compile_only(t.program, t.schedules, t.target)
    except UnsupportedKernel as e:
        raise AkgError(f"the {t.dsl} backend cannot express a kernel of {t.problem.name}: {e}") from None


def render(t: Translation, timing: dict[str, Any] | None = None) -> str:
    """The module's text: rendered once per set of schedules, the header (verdict, timing) prepended."""
    key = frozenset(t.schedules.items()) | frozenset(x for _, _, sch in t.buckets for x in sch.items())
    if t._body is None or t._body[0] != key:
        backend = get_backend(t.dsl)
        try:
            body = backend.render_module(t.program, t.schedules, t.target, t.graph.meta, t.graph.weights,
                                         t.buckets)
        except UnsupportedKernel as e:
            raise AkgError(f"the {t.dsl} backend cannot express a kernel of {t.problem.name}: {e}") from None
        if "jax_params" in t.graph.meta:  # a JAX problem: the module's entry is model(params, *inputs)
            body += jax_entry(t.graph.meta["jax_params"], t.graph.meta["jax_inputs"])
        t._body = (key, body)
    return with_header(header(t, timing), t._body[1])


def module_body(t: Translation) -> str:
    """The module's text without its header: its kernels, launches and checks, what a time measures."""
    render(t)
    assert t._body is not None
    return t._body[1]


def measured_as(t: Translation) -> dict[str, Any]:
    """What the database keys a strategy's module time by: the strategy and the module it wrote (its
    source's hash), so a module that akg now writes differently (a renderer changed) is measured again,
    not served the old module's time."""
    return {**t.strategy.to_json(), "module": hashlib.sha256(module_body(t).encode()).hexdigest()[:16]}


def _prebuild(t: Translation, build_dir: Path | None) -> None:
    """The backend's prebuild hook (its compiler, no module code) started in a thread where the verification
    keeps its build in `build_dir` and the module is akg's own rendering: while the verifier's fork server
    imports, the library is built where the worker's import will look. A failure is the worker's to report."""
    spec = get_backend(t.dsl).manifest.prebuild
    if not spec or build_dir is None or t.executor != "native":
        return

    def run() -> None:
        try:
            hook(spec)(t.source, build_dir)
        except Exception:  # noqa: BLE001 - the worker builds it again, and reports what fails
            pass
    threading.Thread(target=run, name="akg-prebuild", daemon=True).start()


def _verify(t: Translation, check: CheckOptions) -> Verdict:
    _prebuild(t, check.build_cache)
    with tempfile.TemporaryDirectory(prefix="akg-translate-") as d:
        cand = Path(d) / f"{t.problem.stem}_{t.dsl}.py"
        cand.write_text(t.source)
        return verify(t.problem, cand, t.target, check)


_PLAN_FIELDS = frozenset(f.name for f in fields(PlanOptions))


def _tf32_convs(t: Translation, opts: PlanOptions) -> bool:
    """Whether the untuned plan put fp32 convolutions channels-last (where cuDNN picks TF32 kernels)."""
    return opts.tf32_convs and opts.conv == "library" and t.strategy.conv == "channels-last" and \
        t.strategy_s is None and \
        any(s.op in ("conv", "conv_transpose") and s.out.dtype == "f32" and s.attrs.get("channels_last")
            for s in t.program.library_calls())


def translate(problem_path: str | Path, dsl: str, target_name: str | HardwareModel, out: str | Path | None = None,
              options: PlanOptions | None = None, check: CheckOptions | None = None, verify_result: bool = True,
              **changes: Any) -> Translation:
    """`build`, rendered, verified as `check` says (timed where the device is here and `check.timing`; by
    default seeds 0-4, timed against eager) and written to `out`. `changes`: fields of either value by
    keyword (`allow_opaque=True`, `timing=False`)."""
    opts = replace(options or PlanOptions(), **{k: v for k, v in changes.items() if k in _PLAN_FIELDS})
    check = replace(check or CheckOptions(seeds=(0, 1, 2, 3, 4), timing=True, baselines=("eager",)),
                    **{k: v for k, v in changes.items() if k not in _PLAN_FIELDS})
    target = model_of(target_name)
    if verify_result and dsl in available() and \
            get_backend(dsl).manifest.executor(target, device_present(target)) in ("native", "interpreter", "emulator"):
        prestart_for(target, dsl=dsl)  # the verifier's server imports (~7 s) while the problem is lifted and planned
    t = build(problem_path, dsl, target, opts)
    t.source = render(t)
    if t.executor == "none":
        t.notes.append(f"no executor for {dsl} on {t.target.name} here: written, not run")
    elif t.executor == "compile-only":
        t.compiled = compile_only(t)
        t.notes.append(t.compiled)
        t.source = render(t)
    elif verify_result:
        timed = check.timing and t.executor == "native"
        check = replace(check, timing=timed, baselines=check.baselines if timed else (), train=opts.train)
        t.verdict = _verify(t, check)
        # what the plan chose for speed and the verifier may refuse, the least accurate first: TF32
        # convolutions (10-bit products), then split-precision GEMMs (near fp32); each is dropped only where
        # the module as planned fails, so a model with both verifies at most three times, mostly twice
        if not t.verdict.accepted and _tf32_convs(t, opts):  # the cost model's TF32 layout, not the user's
            why = t.verdict.reason
            t = build(problem_path, dsl, target_name, replace(opts, tf32_convs=False))
            t.notes.append(f"fp32 convolutions channels-last (TF32 kernels) failed verification ({why}): "
                           "channels-first instead")
            t.source = render(t)
            t.verdict = _verify(t, check)
        split = {n for n, s in [*t.schedules.items(), *(x for _, _, sch in t.buckets for x in sch.items())]
                 if s.get("input_precision") in SPLIT_PRODUCTS}
        if not t.verdict.accepted and split:  # split precision is allowed only where it verifies
            t.notes.append(f"split-precision GEMMs failed verification ({t.verdict.reason}): plain fp32 instead")
            t.schedules = {n: s.replace(input_precision="ieee") if n in split else s for n, s in t.schedules.items()}
            t.buckets = [(u, p, {n: s.replace(input_precision="ieee") if s.get("input_precision") in SPLIT_PRODUCTS
                                 else s for n, s in sch.items()}) for u, p, sch in t.buckets]
            t.source = render(t)
            t.verdict = _verify(t, check)
        if not t.verdict.accepted:
            raise AkgError(f"the generated {dsl} module for {t.problem.name} failed verification: "
                           f"{t.verdict.reason}; nothing written")
        if timed:  # slower than eager: the library's families measured once beside it
            def rebuilt(s: Strategy) -> Translation:
                return build(problem_path, dsl, t.target, replace(opts, rows=s.rows, conv=s.conv, library=s.library))

            def checked(x: Translation) -> None:
                x.source = render(x)
                x.verdict = _verify(x, check)
            t = measured_choice(t, rebuilt, checked, measured_as)
        t.source = render(t, t.verdict.details.get("timing"))
    if out is not None:
        out = Path(out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(t.source)
    return t
