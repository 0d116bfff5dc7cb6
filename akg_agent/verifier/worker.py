"""The sandboxed side of the verifier: the only place candidate code runs.

Started by `sandbox.run_job` as `python -m akg_agent.verifier.worker JOB.json`; writes its verdict
to the job's result path. Every check that can fail names its reason in one line.
"""

from __future__ import annotations

import copy
import functools
import ipaddress
import json
import math
import resource
import secrets
import sys
import threading
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch

from dsl_backends import hook, precompilers
from ir.problem import load_problem

from . import timing, window
from .candidate import compare_chunked, fingerprint, first_line, load_candidate
from .discrete import compare_discrete
from .gradstep import GradStep, trained_names, what
from .guard import AtenGuard, undeclared
from .integrity import Sentry, Snapshot
from .jax_check import check_jax
from .policy import Comparison, Reject, TolerancePolicy, compare, job_policy
from .reference import float64_trial, nbytes, outputs, run_float64, to_device
from .sensitivity import applies, base_and_nudged, judge, response
from .sizes import dynamic_sizes, sized_inputs
from .timed import guard_cost, time_candidate


def _block_network() -> None:
    """Deny non-loopback network use from Python (the parent also tries a network namespace)."""
    def loopback(host: Any) -> bool:
        if host in (None, "localhost", "") or isinstance(host, int):
            return True
        try:
            return ipaddress.ip_address(str(host)).is_loopback
        except ValueError:
            return False

    def hook(event: str, args: tuple) -> None:
        if event == "socket.getaddrinfo" and not loopback(args[0]):
            raise PermissionError(f"network access is not allowed in the verifier sandbox ({args[0]})")
        if event in ("socket.connect", "socket.sendto") and isinstance(args[1], tuple) and not loopback(args[1][0]):
            raise PermissionError("network access is not allowed in the verifier sandbox")

    sys.addaudithook(hook)


def _poison_allocator(sizes: list[int], device: torch.device, value: float = math.nan) -> None:
    """Leave a poison value in the memory the next allocations will likely get: an output the
    candidate never writes then shows up as NaN (or changes from run to run) instead of passing as
    a stale correct answer."""
    blocks = [torch.full((max(1, n // 4),), value, dtype=torch.float32, device=device) for n in sizes]
    del blocks


class _Phases:
    """Seconds per verification phase, summed over trials (the device synchronised at each edge)."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.seconds: dict[str, float] = {}

    @contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        t0 = timing._clock()
        try:
            yield
        finally:
            if self.device.type == "cuda":
                torch.cuda.synchronize(self.device)
            self.seconds[name] = round(self.seconds.get(name, 0.0) + timing._clock() - t0, 3)


def _peak_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _run(cand: Any, inputs: list[Any], guard: AtenGuard, device: torch.device, label: str,
         sentry: Sentry) -> list[Any]:
    threads = set(threading.enumerate())
    try:
        with torch.no_grad(), guard:
            out = outputs(cand(*inputs))
        if device.type == "cuda":
            timing._sync()
    except MemoryError:
        raise Reject("memory", f"ModelNew.forward exceeded the memory limit ({label})") from None
    except Exception as e:  # noqa: BLE001
        msg = first_line(e)
        code = "network" if "not allowed in the verifier sandbox" in msg else "runtime_error"
        raise Reject(code, f"ModelNew.forward raised {msg} ({label})") from None
    sentry.after_call(label, threads, out)
    return out


def _precompiled(mod: Any, cand: Any, make_inputs: list[Callable[[], list[Any]]]) -> dict[str, Any]:
    """What the manifests' precompile hooks did with the candidate (its outputs are not looked at), given an
    input set for each size the trials run."""
    done = {}
    for dsl, where in precompilers():
        got = hook(where)(mod, cand, make_inputs)
        if got is not None:
            done[dsl] = got
    return {"precompile": done} if done else {}


def _signed_variant(inputs: list[Any], seed: int, fixed: frozenset[int] = frozenset()) -> list[Any]:
    """Every floating-point input drawn from N(0, 4), except those the problem marks as fixed
    (`AKG_FIXED_INPUTS`: weights passed as inputs, e.g. a graph captured by torch.compile)."""
    dev = next((x.device for x in inputs if isinstance(x, torch.Tensor)), torch.device("cpu"))
    g = torch.Generator(device=dev).manual_seed(seed)  # drawn where the inputs live
    return [torch.randn(x.shape, generator=g, dtype=torch.float32, device=dev).mul_(2).to(x.dtype)
            if isinstance(x, torch.Tensor) and x.is_floating_point() and i not in fixed else x
            for i, x in enumerate(inputs)]


def check(job: dict[str, Any]) -> dict[str, Any]:
    device = torch.device(job["device"])
    setup = _Phases(torch.device("cpu"))  # what a verification spends before its first trial
    with setup("problem"):
        problem = load_problem(job["ref"])
    policy = job_policy(job, problem.module)
    if device.type == "cuda":  # the context made, its own settings (a default persisting-L2 carve-out) recorded
        with setup("device"):
            torch.empty(1, device=device)
    with setup("snapshot"):
        sentry = Sentry(Snapshot.take())  # before any of the candidate's code runs
    with setup("import"):  # the candidate's kernels built (a C-family compile, a JAX trace)
        mod = load_candidate(Path(job["cand"]))
    sentry.check("at import", dispatch=True)
    declared = list(getattr(mod, "AKG_LIBRARY_CALLS", []))
    with setup("models"):
        ref = problem.build_model(0).to(device)
    torch.manual_seed(0)
    init = problem.get_init_inputs()
    try:
        cand = mod.ModelNew(*init)
    except Exception as e:  # noqa: BLE001
        raise Reject("init_error", f"ModelNew(*get_init_inputs()) raised {first_line(e)}") from None
    try:
        cand.load_state_dict(ref.state_dict(), strict=True)
    except Exception as e:  # noqa: BLE001
        raise Reject("state_dict", f"ModelNew is not state_dict-compatible with Model: {first_line(e)}") from None
    cand = cand.to(device)
    sentry.check("in ModelNew()")
    train = bool(job.get("train", False))
    ref.train(train)
    cand.train(train)
    if job.get("backward"):  # gradients checked and timed as outputs (`gradstep.py`)
        names = trained_names(ref)
        ref, cand = GradStep(ref, names), GradStep(cand, names)
    ref64, no64 = None, ""
    try:
        ref64 = copy.deepcopy(ref).double()
    except Exception as e:  # noqa: BLE001 - some references cannot run in float64: said in the verdict
        no64 = first_line(e)[:200]

    # each trial's inputs are made when it runs: one trial's tensors alive at a time
    make_inputs = functools.partial(problem.make_inputs, device=device)  # drawn where they are used
    trials: list[tuple[str, Callable[[], list[Any]]]] = [
        (f"seed {sd}", lambda sd=sd: make_inputs(sd)) for sd in job["seeds"]]
    # one seed drawn now, after the candidate's import: answers memorised for seeds it could predict miss
    unseen = 10**6 + secrets.randbelow(2**30)
    trials.append((f"unseen seed {unseen}", lambda: make_inputs(unseen)))
    if job.get("variants", True):
        fixed = frozenset(getattr(problem.module, "AKG_FIXED_INPUTS", ()))
        trials.append(("signed inputs",
                       lambda: _signed_variant(make_inputs(job["seeds"][0]), 1234, fixed)))
    dynamic = getattr(mod, "AKG_DYNAMIC", None) or {}
    discrete = {} if job.get("backward") else getattr(problem.module, "AKG_DISCRETE_OUTPUTS", None) or {}
    sized = [(", ".join(f"{k}={min(n, v['traced'])}" for k, v in dynamic.items()),
              lambda n=n: sized_inputs(make_inputs, job["seeds"][0], dynamic, n))
             for n in dynamic_sizes(dynamic)]  # a module of run-time sizes, checked at sizes inside its envelope
    trials += sized
    guard_ops: set[str] = set()
    history: list[tuple[list[Any], list[Any]]] = []  # fingerprints of each trial's outputs
    details: dict[str, Any] = {"trials": [], "degenerate_outputs": [], "library_calls": declared,
                               "numerics": {"cudnn_tf32": torch.backends.cudnn.allow_tf32,
                                            "matmul_tf32": torch.backends.cuda.matmul.allow_tf32},
                               "mode": "train" if train else "eval"}
    if no64:
        details["float64_reference_error"] = no64
    passed_first = False
    footprint = 0
    base_rss = _peak_rss()
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
        base_gpu = torch.cuda.memory_allocated(device)
    # random ops inside forward draw from torch's global generator: the reference, its float64 copy and
    # the candidate are seeded alike before each call, so they draw the same numbers
    details["rng"] = "torch.manual_seed(10007 + trial) before each call of the reference and the candidate"
    phase = _Phases(device)
    phase.seconds.update({f"setup_{k}": v for k, v in setup.seconds.items()})
    details["phase_s"] = phase.seconds  # where a verification's time goes (a real-size run takes minutes)
    if device.type == "cuda" and job.get("precompile", True):  # a JIT DSL's kernels compiled at once
        threads = set(threading.enumerate())
        with phase("precompile"):
            details |= _precompiled(mod, cand, [lambda make=make: [to_device(x, device) for x in make()]
                                                for make in [trials[0][1]] + [m for _, m in sized]])
        sentry.after_call("in the precompile pass", threads, [])  # the candidate's code ran: watched as a call
    draws = False  # whether the reference's forward draws random numbers
    sizes: list[int] = []  # the reference's output sizes on the trial before: the next candidate call's poison
    for trial, (label, make) in enumerate(trials):
        rng = 10007 + trial
        with phase("inputs"):
            raw = make()
            inputs = [to_device(x, device) for x in raw]
        # the candidate runs first: the reference's answer to these inputs does not exist yet, so nothing
        # the candidate can reach (the heap, the verifier's own frames) holds it
        before = [fingerprint(x) for x in inputs]
        guard = AtenGuard(poison=math.nan)
        torch.manual_seed(rng)
        with phase("candidate"):
            _poison_allocator(sizes, device)  # last, so the candidate's own allocations get these blocks
            out = _run(cand, inputs, guard, device, label, sentry)
        guard_ops |= set(guard.compute_ops())
        for i, (b, x) in enumerate(zip(before, inputs)):
            if isinstance(x, torch.Tensor) and fingerprint(x) != b:
                raise Reject("input_mutated", f"ModelNew.forward writes into input {i} ({label})")
        with torch.no_grad(), phase("reference"):
            torch.manual_seed(rng)
            state = _rng_state(device)
            keep = outputs(ref(*[x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]))
            draws = draws or not _same_rng(state, _rng_state(device))
        sizes = [nbytes(o) for o in keep]
        trial_bytes = sum(sizes) + sum(nbytes(x) for x in inputs)
        with torch.no_grad(), phase("float64_reference"):
            r64 = None
            if ref64 is not None:
                ref64, r64 = float64_trial(ref64, raw, rng, device, details, trial_bytes,
                                           widen=policy.computes_in is not None)
        if label == "signed inputs" and any(o.is_floating_point() and not bool(torch.isfinite(o).all())
                                            for o in keep):
            continue  # the reference itself is not defined on this distribution
        footprint = max(footprint, trial_bytes)
        if len(out) != len(keep):
            raise Reject("wrong_outputs", f"{len(out)} outputs, the reference has {len(keep)}")
        with phase("compare"):
            out_fp = [fingerprint(o) for o in out]
        for i, (c, r) in enumerate(zip(out, keep)):
            with phase("compare"):
                res = _judged(c, r, r64[i] if r64 is not None and r64[i].shape == r.shape else None, policy,
                              (discrete.get(i), problem.module, inputs, rng))
            if res.degenerate and i not in details["degenerate_outputs"]:
                details["degenerate_outputs"].append(i)
            details["trials"].append({"trial": label, "output": i, "ok": res.ok, "max_abs_err": res.max_abs_err,
                                      "ref_max_abs_err": res.ref_max_abs_err, "vs_float64": r64 is not None})
            if res.ok:
                continue
            if isinstance(c, torch.Tensor):
                _no_replay(cand, i, out_fp[i], fingerprint(r), history, label)
            # run again on the same inputs over differently poisoned memory: an output that changes
            # was never (fully) written by the candidate
            args = [to_device(x, device) for x in raw]
            torch.manual_seed(rng)
            _poison_allocator(sizes, device, value=-7.7e30)  # last: the candidate gets these blocks
            again = _run(cand, args, AtenGuard(poison=-7.7e30), device, label, sentry)
            if i < len(again) and isinstance(c, torch.Tensor) and not compare_chunked(again[i], c, policy, None).ok:
                raise Reject("stale_memory", f"{what(cand, i)} differs between two runs on the same inputs: it "
                                             f"reads uninitialised or stale memory ({label})")
            hint = " (correct on the first seed only: special-cased?)" if passed_first else ""
            code = "degenerate" if res.degenerate else "wrong_values"
            why64 = details.get("float64_reference_error")  # judged against torch alone: say why
            alone = f" (against torch alone: no float64 reference, {why64})" if r64 is None and why64 else ""
            raise Reject(code, f"{what(cand, i)} wrong on {label}: {res.reason}{alone}{hint}")
        passed_first = True
        history.append((out_fp, [fingerprint(k) for k in keep]))
        held = _state_storages(ref)
        for o in keep:  # the reference's buffers hold NaN when freed: a later call that reads them is caught
            if o.is_floating_point() and o.untyped_storage().data_ptr() not in held:  # not its own state
                o.fill_(math.nan)
        del inputs, raw, out, keep, r64  # one trial's tensors at a time
        if device.type == "cuda":
            torch.cuda.empty_cache()
    # the verifier's own peak, as a multiple of one trial's inputs and outputs (the problem's footprint)
    peak = (torch.cuda.max_memory_allocated(device) - base_gpu if device.type == "cuda"
            else max(0, _peak_rss() - base_rss))
    details.update(footprint_bytes=footprint, peak_bytes=peak,
                   peak_over_footprint=round(peak / footprint, 2) if footprint else None)
    sentry.check("after the checks", dispatch=True)
    _check_state(ref, cand, policy, len(history))
    if ref64 is not None and not draws and "float32" not in policy.overrides and policy.computes_in is None:
        # looser fp32 asked for, or a program that computes in bf16 itself: not judged
        with phase("sensitivity"):
            guard_ops |= _sensitivity(cand, ref, ref64, make_inputs(job["seeds"][0]), device, sentry, details,
                                      (policy, history, discrete, problem.module))
    bad_ops = undeclared(sorted(guard_ops), declared)
    if bad_ops:
        raise Reject("torch_compute", f"ModelNew.forward computes with torch ops it did not declare: "
                                      f"{', '.join(bad_ops[:6])}" + (" ..." if len(bad_ops) > 6 else ""))
    details["torch_ops_used"] = sorted(guard_ops)
    if job.get("timing"):
        before = timing.waited_s()
        with phase("timing"):
            details["timing"] = time_candidate(job, problem, ref, cand, device, sentry, dynamic, check_output=not draws)
        if "sol_s_now" in details["timing"]:  # beside the timings, which are each a contender's
            details["sol_s_now"] = details["timing"].pop("sol_s_now")
        # part of "timing": waiting while another run timed or compiled (max-autotune) on the device
        phase.seconds["timing_lock_wait"] = round(timing.waited_s() - before, 3)
        if dynamic:
            details["timed_at"] = {k: v["traced"] for k, v in dynamic.items()}
        guard = getattr(mod, "_akg_guard", None)
        if guard is not None:
            details["guard_us"] = guard_cost(guard, problem.make_inputs(1000, device))
    return {"status": "accepted", "code": "ok", "reason": "matches the reference on "
            f"{len(history)} input sets", "details": details}


def _judged(c: Any, r: torch.Tensor, r64: torch.Tensor | None, policy: TolerancePolicy,
            probe: tuple[dict[str, Any] | None, Any, list[Any], int]) -> Comparison:
    """One output against torch's; a discrete one (`discrete`: near-equal maxima swapped, a ReLU's mask
    flipped at zero) that differs, by the values it was taken from: `probe` is (its spec or None, the
    problem's module, the trial's inputs, its seed)."""
    res = compare_chunked(c, r, policy, r64)
    spec, mod, inputs, rng = probe
    if not res.ok and spec is not None and isinstance(c, torch.Tensor):
        res = compare_discrete(c, r, *_discrete_values(mod, spec, inputs, rng), spec, policy)
    return res


def _discrete_values(mod: Any, spec: dict[str, Any], inputs: list[Any], rng: int
                     ) -> tuple[torch.Tensor, torch.Tensor | None]:
    """torch's values a discrete output was taken from (`discrete`), and their float64 evaluation (casts
    widened; None where the probe cannot run in float64): how far torch's own values are from exact
    decides how near a threshold a flip is rounding."""
    def probe(*xs: Any) -> list[Any]:
        return outputs(mod.akg_discrete_values(*xs))

    with torch.no_grad():
        torch.manual_seed(rng)
        values = probe(*[x.clone() if isinstance(x, torch.Tensor) else x for x in inputs])[spec["value"]]
        torch.manual_seed(rng)
        try:
            exact = run_float64(probe, [to_device(x, x.device if isinstance(x, torch.Tensor) else None, double=True)
                                        for x in inputs], widen=True)[spec["value"]]
        except Exception:  # noqa: BLE001 - then judged by the plain tolerance (stricter)
            exact = None
    return values, exact


def _sensitivity(cand: Any, ref: Any, ref64: Any, raw: list[Any], device: torch.device, sentry: Sentry,
                 details: dict[str, Any],
                 checked: tuple[TolerancePolicy, list[tuple[list[Any], list[Any]]], dict[int, Any], Any]) -> set[str]:
    """fp32 programs: the answer must follow inputs nudged below bf16's resolution (`sensitivity.py`).
    Both answers are value-checked first: a wrong one (a cached answer keyed by address, say) is rejected
    for what it is, not read as a slope. Returns the torch ops the candidate computed with meanwhile."""
    guard_ops: set[str] = set()
    sets = base_and_nudged(raw, 4321)
    runs: dict[str, list[list[Any]]] = {"candidate": [], "torch": [], "float64": []}
    policy, history, discrete, mod = checked
    for x in sets:
        inputs = [to_device(v, device) for v in x]
        if not applies(inputs):
            return guard_ops
        guard = AtenGuard(poison=math.nan)
        torch.manual_seed(20011)
        runs["candidate"].append(_run(cand, inputs, guard, device, "inputs nudged below bf16's resolution", sentry))
        guard_ops |= set(guard.compute_ops())
        with torch.no_grad():
            torch.manual_seed(20011)
            runs["torch"].append(outputs(ref(*inputs)))
            _, r64 = float64_trial(ref64, list(x), 20011, device, details)
        if r64 is None:
            return guard_ops
        runs["float64"].append(r64)
        _value_check(cand, runs["candidate"][-1], runs["torch"][-1], r64, checked, inputs,
                     "inputs nudged below bf16's resolution")
        history.append(([fingerprint(o) for o in runs["candidate"][-1]], [fingerprint(o) for o in runs["torch"][-1]]))
    mine, control = (response(*runs[k], *runs["float64"]) for k in ("candidate", "torch"))
    details["sensitivity"] = {k: v and {"slope": round(v.slope, 4), "spread": round(v.spread, 4), "n": v.n}
                              for k, v in (("candidate", mine), ("torch", control))}
    why = judge(mine, control)
    if why:
        raise Reject("precision", why)
    return guard_ops


def _state_storages(ref: Any) -> set[int]:
    """Where the reference module's own tensors live (parameters, buffers, tensor attributes): an output that
    is one of them (a dynamo graph returning a constant it holds, Mixtral's zeros) is its state, not a freed
    buffer to poison."""
    mods = list(ref.modules()) if isinstance(ref, torch.nn.Module) else []
    return {t.untyped_storage().data_ptr() for m in mods
            for t in (*m.parameters(recurse=False), *m.buffers(recurse=False),
                      *(v for v in vars(m).values() if isinstance(v, torch.Tensor)))}


def _no_replay(cand: Any, i: int, got: Any, want: Any, history: list[tuple[list[Any], list[Any]]],
               label: str) -> None:
    """A wrong output `i` (fingerprint `got`, the reference's `want`) that an earlier call returned for
    different inputs is a replay."""
    for prev_c, prev_r in history:
        if i < len(prev_c) and prev_c[i] == got and prev_r[i] != want:
            raise Reject("replayed", f"{what(cand, i)} repeats an earlier answer for different inputs "
                                     f"(cached or replayed; {label})")


def _value_check(cand: Any, out: list[Any], ref: list[Any], r64: list[Any],
                 checked: tuple[TolerancePolicy, list[tuple[list[Any], list[Any]]], dict[int, Any], Any],
                 inputs: list[Any], label: str) -> None:
    """Each output within tolerance of torch's on the same inputs; an earlier answer repeated is a replay."""
    policy, history, discrete, mod = checked
    for i, (c, r) in enumerate(zip(out, ref)):
        if not isinstance(c, torch.Tensor) or not isinstance(r, torch.Tensor):
            continue
        res = _judged(c, r, r64[i] if i < len(r64) and r64[i].shape == r.shape else None, policy,
                      (discrete.get(i), mod, inputs, 20011))
        if res.ok:
            continue
        _no_replay(cand, i, fingerprint(c), fingerprint(r), history, label)
        raise Reject("wrong_values", f"{what(cand, i)} wrong on {label}: {res.reason}")


def _rng_state(device: torch.device) -> list[torch.Tensor]:
    return [torch.random.get_rng_state()] + ([torch.cuda.get_rng_state(device)] if device.type == "cuda" else [])


def _same_rng(a: list[torch.Tensor], b: list[torch.Tensor]) -> bool:
    return all(torch.equal(x, y) for x, y in zip(a, b))


def _check_state(ref: torch.nn.Module, cand: torch.nn.Module, policy: TolerancePolicy, calls: int) -> None:
    """Buffers forward writes (a recurrent state, a running count) must hold what the reference's hold
    after the same calls: a stateful module stays drop-in across calls."""
    mine = dict(cand.named_buffers())
    for key, want in ref.named_buffers():
        got = mine.get(key)
        if got is None:
            raise Reject("state", f"ModelNew has no buffer {key!r}, which Model keeps")
        res = compare(got.detach().cpu(), want.detach().cpu(), policy)
        if not res.ok:
            raise Reject("state", f"buffer {key!r} after {calls} calls differs from the reference's: {res.reason}")


def profile_run(job: dict[str, Any]) -> dict[str, Any]:
    """Runs forward under a profiler: a warm-up outside the profiled range, then `iters` calls inside it
    (cudaProfilerStart/Stop, which `ncu --profile-from-start off` honours)."""
    device = torch.device(job["device"])
    problem = load_problem(job["ref"])
    mod = load_candidate(Path(job["cand"]))
    ref = problem.build_model(0)
    cand = mod.ModelNew(*problem.get_init_inputs())
    cand.load_state_dict(ref.state_dict(), strict=True)
    cand = cand.to(device).eval()
    inputs = [to_device(x, device) for x in problem.make_inputs(0, device)]
    with torch.no_grad():
        cand(*inputs)
        torch.cuda.synchronize()
        torch.cuda.profiler.start()
        for _ in range(int(job["profile"].get("iters", 1))):
            cand(*inputs)
        torch.cuda.synchronize()
        torch.cuda.profiler.stop()
    return {"status": "accepted", "code": "profiled", "reason": "profiled", "details": {}}


def main(argv: list[str]) -> int:
    job = json.loads(Path(argv[1]).read_text())
    # the result carries the job's nonce, which the candidate is not handed: a verdict file it writes
    # itself (and exits) lacks it. The job file goes before the candidate runs in this directory.
    nonce = job.pop("nonce", None)
    Path(argv[1]).unlink(missing_ok=True)
    window.open_barrier(job, nonce)
    _block_network()
    result_path = Path(job["result"])
    if job.get("lock"):  # `akg bench --jobs`, Ray workers: runs share the device, one times at once
        timing.LOCK_PATH = job["lock"]
        timing.WAIT_PATH = str(result_path.parent / timing.LOCK_WAIT_FILE)
        timing.hold_shared()
    try:
        result = profile_run(job) if job.get("profile") else \
            check_jax(job, load_candidate) if job.get("frontend") == "jax" else check(job)
    except Reject as r:
        result = {"status": "rejected", "code": r.code, "reason": r.reason, "details": {}}
    except MemoryError:
        result = {"status": "rejected", "code": "memory", "reason": "candidate exceeded the memory limit",
                  "details": {}}
    except Exception as e:  # noqa: BLE001 - anything else is reported as the verifier's own failure
        result = {"status": "error", "code": "verifier_error", "reason": first_line(e),
                  "details": {"traceback": traceback.format_exc()[-4000:]}}
    result["nonce"] = nonce
    result_path.write_text(json.dumps(result, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
