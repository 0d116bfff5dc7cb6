"""The timed side of a check: the candidate, its baselines and peers built and checked, then timed in turns
under the integrity sentry, its timed answer checked, and the window the parent stamps."""

from __future__ import annotations

import contextlib
import copy
import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from hardware_models.calibrate import cpu_bandwidth_now

from . import timing, window
from .candidate import compare_chunked, fingerprint, first_line, load_candidate
from .gradstep import GradStep
from .integrity import Sentry, Snapshot
from .policy import Reject, TolerancePolicy, job_policy
from .reference import float64_outputs, nbytes, outputs, timing_sets, to_device
from .sizes import sized_inputs
from .timing import Timing, Watch, side_stream_suspected, time_interleaved


def guard_cost(guard: Any, inputs: list[Any], calls: int = 2000) -> float:
    """Microseconds per call of a written module's input guard (the host-side check before its
    launches): the median of five batches."""
    args = tuple(inputs)
    runs = []
    for _ in range(5):
        t0 = timing._clock()
        for _ in range(calls):
            guard(args)
        runs.append((timing._clock() - t0) / calls * 1e6)
    return sorted(runs)[2]


def time_candidate(job: dict[str, Any], problem: Any, ref: Any, cand: Any, device: torch.device, sentry: Sentry,
          dynamic: dict[str, Any] | None = None, check_output: bool = True) -> dict[str, Any]:
    """The candidate and baselines timed on the same inputs: get_inputs()' sizes, or a module of run-time
    sizes at its largest (each dynamic dimension at its bound). `check_output`: the timed calls' answer is
    compared with the reference's (not where forward draws random numbers)."""
    t = job["timing"]
    policy = job_policy(job, problem.module)
    top = max((v["traced"] for v in (dynamic or {}).values()), default=0)
    draw = functools.partial(problem.make_inputs, device=device)
    make = (lambda sd: sized_inputs(draw, sd, dynamic, top)) if dynamic else draw
    first = [to_device(x, device) for x in make(1000)]
    capacity = torch.cuda.get_device_properties(device).total_memory if device.type == "cuda" else None
    n_sets = timing_sets(t.get("input_sets", 3), sum(nbytes(x) for x in first), capacity)
    sets = [first] + [[to_device(x, device) for x in make(1000 + i)] for i in range(1, n_sets)]
    trials = t.get("trials")
    out: dict[str, Any] = {}
    with torch.no_grad():
        # everything built and checked first; then every contender timed in turns (exclusively, under a lock)
        sentry.check("before timing", dispatch=True)
        base = {name: _baseline(name, ref, sets, device) for name in t.get("baselines", [])}
        expected = _expected(ref, sets)
        peers = {label: _peer(i, Path(path), problem, ref, sets, device, expected)
                 for i, (label, path) in enumerate(t.get("peers", {}).items())}
        expected.cache_clear()  # the reference's outputs (float64 too) are not needed while timing
        state = [fingerprint(b) for b in cand.buffers()]
        sentry.snapshot = Snapshot.take()  # what compiling the baselines and loading the peers changed is theirs
        others = {**{n: fn for n, (fn, _) in base.items() if fn is not None},
                  **{f"peer:{lb}": fn for lb, (fn, _) in peers.items() if fn is not None}}
        watch = Watch(after_turn=lambda: sentry.check("while timed"), keep="candidate")
        timed_last = None  # the timing whose kept output answers the inputs as they are now (they vary per turn)
        if t.get("order") == "first_last":  # a re-timing: the candidate alone first, the others, it again last
            got = time_interleaved({"candidate": cand}, sets, device, trials, watch=watch)
            got.update(time_interleaved(others, sets, device, trials, watch=watch))
            timed_last = time_interleaved({"candidate": cand}, sets, device, trials, watch=watch)["candidate"]
            out["candidate_last"] = (timed_last.to_json() if isinstance(timed_last, Timing)
                                     else {"error": first_line(timed_last)})
        else:
            got = time_interleaved({"candidate": cand, **others}, sets, device, trials, watch=watch)
        sentry.check("after timing", dispatch=True)
        cand_t = got["candidate"]
        if isinstance(cand_t, Exception):
            raise cand_t
        out["candidate"] = cand_t.to_json()
        if check_output and state == [fingerprint(b) for b in cand.buffers()]:  # stateless: same answer
            _check_timed_output((timed_last if isinstance(timed_last, Timing) else cand_t).output, expected, policy)
        out["candidate"]["window"] = window.run(cand, sets[0], device, max(cand_t.median_s, cand_t.host_median_s))
        if side_stream_suspected(cand_t):
            raise Reject("side_stream", f"the device ran {cand_t.tail_median_s * 1e3:.3g} ms past the timed stream's "
                                        f"{cand_t.median_s * 1e3:.3g} ms: work runs outside the timed stream")
        sol = job.get("sol_s")
        if sol and cand_t.median_s < 0.9 * sol and job.get("sol_memory"):
            sol = out["sol_s_now"] = _sol_now(job["sol_memory"])
        if sol and cand_t.median_s < 0.9 * sol:
            raise Reject("faster_than_sol", f"{cand_t.median_s * 1e3:.4g} ms beats the speed-of-light "
                                            f"{sol * 1e3:.4g} ms: work is skipped or mis-timed")
        for name, (_, res) in base.items():  # absent from `got`: it did not compile (res says why)
            out[name] = _timed(got.get(name), res, peer=False)
        if peers:
            out["peers"] = {lb: _timed(got.get(f"peer:{lb}"), res, peer=True) for lb, (_, res) in peers.items()}
    return out


def _check_timed_output(got: Any, expected: Callable[[], tuple[list[Any], list[Any] | None]],
                        policy: TolerancePolicy) -> None:
    """The candidate's answer from a timed call (its last on the first input set) against the reference's:
    a module that behaves one way under the verifier's checks and another when timed (it looked for the
    guard, the timer's frames, an environment variable) is caught here."""
    want, w64 = expected()
    got = outputs(got)
    bad = [j for j, (g, w) in enumerate(zip(got, want))
           if not isinstance(g, torch.Tensor) or g.shape != w.shape
           or not compare_chunked(g.detach(), w.detach(), policy, w64[j] if w64 is not None and w64[j].shape == w.shape
                           else None).ok]
    if len(got) != len(want) or bad:
        raise Reject("timed_output", f"output {bad[0] if bad else len(want)} of a timed call differs from the "
                                     "reference: the module computes otherwise when timed")
    expected.cache_clear()


def _sol_now(mem: dict[str, float]) -> float:
    """The speed-of-light again at the bandwidth the host shows now, where that is higher than the one the
    bound assumed (a calibration taken while the VM's neighbours were busy); never a looser bound than
    the memory traffic at the present bandwidth or the rest of the bound."""
    with timing.exclusive():
        now = cpu_bandwidth_now()
    return max(mem["other_s"], mem["dram_s"] * min(1.0, mem["bw"] / now))


def _timed(t: Timing | Exception | None, res: dict[str, Any], peer: bool) -> dict[str, Any]:
    """What the table says of a baseline or a peer: why it was not timed, or its time (a peer, which
    passed its check, is also held to the candidate's side-stream rule)."""
    if t is None:
        return res
    if isinstance(t, Exception):
        return {"error": f"running it raised {first_line(t)}"}
    if peer and side_stream_suspected(t):
        return {"error": "work runs outside the timed stream", "correct": True}
    return dict(t.to_json(), **res, **({"correct": True} if peer else {}))


def _expected(ref: Any, sets: list) -> Callable[[], tuple[list[Any], list[Any] | None]]:
    """The reference's outputs and float64 outputs on the first timing input set, computed on the first
    call only: every peer is judged against them, and at real sizes a float64 evaluation takes seconds to
    a minute (a raise is not cached: the next peer tries again)."""
    return functools.cache(lambda: (outputs(ref(*sets[0])), float64_outputs(ref, sets[0])))


def _peer(i: int, path: Path, problem: Any, ref: Any, sets: list, device: torch.device,
          expected: Callable[[], tuple[list[Any], list[Any] | None]]) -> tuple[Any, dict[str, Any]]:
    """Another solution (another DSL's, say), timed later in this process on the same inputs so that a
    table of them shares one run; here it is loaded and checked against the reference on the first
    input set, whose outputs and float64 outputs `expected` gives (computed once for all peers).
    (callable or None, what to report if it is not timed)."""
    try:
        mod = load_candidate(path, f"akg_peer_{i}")
        torch.manual_seed(0)
        cand = mod.ModelNew(*problem.get_init_inputs())
    except Reject as r:
        return None, {"error": r.reason}
    except Exception as e:  # noqa: BLE001 - a broken peer is reported, the table goes on
        return None, {"error": f"ModelNew raised {first_line(e)}"}
    try:
        cand.load_state_dict(ref.state_dict(), strict=True)
        cand = cand.to(device).train(ref.training)
        want, w64 = expected()  # judged as the main candidate is: against float64
        got = outputs(cand(*sets[0]))
        policy = TolerancePolicy()
        bad = [j for j, (g, w) in enumerate(zip(got, want))
               if not compare_chunked(g.detach(), w.detach(), policy,
                               w64[j] if w64 is not None and w64[j].shape == w.shape else None).ok]
        if len(got) != len(want) or bad:
            return None, {"error": f"wrong values on the timing inputs (outputs {bad})", "correct": False}
    except Exception as e:  # noqa: BLE001
        return None, {"error": f"running it raised {first_line(e)}"}
    return cand, {}


def _baseline(name: str, ref: Any, sets: list, device: torch.device) -> tuple[Any, dict[str, Any]]:
    """A baseline's callable, compiled and run once (callable or None, and its compile time or error)."""
    if name == "eager":
        return ref, {}
    if name == timing.AA_BASELINE:  # the same module again: its own parameters, the same values
        return copy.deepcopy(ref), {}
    mode = {"compile": "default", "compile-max-autotune": "max-autotune",
            "compile-max-autotune-no-cudagraphs": "max-autotune-no-cudagraphs"}[name]
    if isinstance(ref, GradStep):  # the model compiled (AOTAutograd writes its backward), the step around it
        model = copy.deepcopy(ref.model)
        fn = GradStep(model, ref.names, torch.compile(model, mode=mode))
    else:
        fn = torch.compile(copy.deepcopy(ref), mode=mode)
    t0 = timing._clock()
    # max-autotune times its candidate kernels while it compiles: alone on the device, as our timings are
    alone = timing.exclusive() if "autotune" in mode else contextlib.nullcontext()
    try:
        with alone:
            fn(*sets[0])
            if device.type == "cuda":
                torch.cuda.synchronize()
    except Exception as e:  # noqa: BLE001 - a baseline that cannot compile is reported, not fatal
        return None, {"error": first_line(e)}
    return fn, {"compile_s": timing._clock() - t0}
