"""The one timing protocol, for baselines and candidates alike.

Warm-up; the last-level cache flushed before each trial; inputs rotated between trials; on the GPU
CUDA events around each trial and the median of >= 100 trials; on the CPU perf_counter medians.
Each trial is also timed on the host after a device-wide synchronise: work launched on another
stream escapes the events but not the host clock.

The clock, the events, the synchronisation and the statistics are references taken when this module is
imported, before any candidate is: a candidate that replaces `time.perf_counter` or `torch.cuda.Event`
changes no figure here (`integrity.py` names what it replaced).
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import fcntl
import functools
import os
import re
import statistics
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from hardware_models.spec import HardwareModel, detect_cpu, load_target

# the references a candidate cannot reach by replacing module attributes (see the docstring)
_clock = time.perf_counter
_median, _fmean, _pstdev = statistics.median, statistics.fmean, statistics.pstdev
_sync = torch.cuda.synchronize
_Event = torch.cuda.Event
_record, _event_sync, _elapsed = torch.cuda.Event.record, torch.cuda.Event.synchronize, torch.cuda.Event.elapsed_time

L2_FLUSH_BYTES = 256 * 1024 * 1024
# `akg bench --jobs`: verifier runs share the GPU through a lock file. Each holds it shared while it
# builds and checks, and exclusively while it times, so a timed loop never overlaps another run's GPU
# work.
LOCK_PATH: str | None = None
# A second file, the gate, makes a waiting timer first in line: flock alone lets new shared holders in
# while an exclusive request waits, so with many runs side by side a timed loop could wait for ever.
# Shared holders pass the gate on their way in; a timer holds it from its request until it has the lock.
GATE_SUFFIX = ".gate"
# where this run notes the time it waits for that lock ("<seconds waited> <waiting since, or 0>"): the
# sandbox does not count it against the run's time limit
WAIT_PATH: str | None = None
LOCK_WAIT_FILE = "lock_wait"  # its name in the run directory
HOST_LOCK = "akg-timing.lock"  # in the host's temporary directory, shared by every akg run there


def host_lock(target: str | HardwareModel = "cpu") -> str:
    """The lock file every akg run on this host times under (bench, tune, Ray actors): two runs started
    side by side never time while the other uses the device. For a GPU target the device is the GPU this
    process sees as its first (CUDA_VISIBLE_DEVICES, as Ray sets it per actor), so runs on the GPUs of one
    host time side by side; a CPU target's device is the whole host."""
    name = HOST_LOCK
    kind = target.kind if isinstance(target, HardwareModel) else \
        "cpu" if target == "cpu" else load_target(target, calibrated=False).kind
    if kind == "gpu":
        first = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip() or "0"
        name = f"{HOST_LOCK}.gpu-{re.sub(r'[^A-Za-z0-9_-]', '_', first)}"
    return str(Path(tempfile.gettempdir()) / name)


_local = threading.local()


def waited_s() -> float:
    """Seconds this run has waited for the timing lock so far, where it notes them (WAIT_PATH)."""
    if WAIT_PATH is None or not Path(WAIT_PATH).is_file():
        return 0.0
    return float(Path(WAIT_PATH).read_text().split()[0])


def _flock(f: Any, op: int) -> None:
    """flock, noting in WAIT_PATH how long it blocks."""
    if WAIT_PATH is None:
        fcntl.flock(f, op)
        return
    try:
        fcntl.flock(f, op | fcntl.LOCK_NB)
        return
    except BlockingIOError:
        pass
    waited = float(Path(WAIT_PATH).read_text().split()[0]) if Path(WAIT_PATH).is_file() else 0.0
    since = time.time()
    Path(WAIT_PATH).write_text(f"{waited} {since}")
    fcntl.flock(f, op)
    Path(WAIT_PATH).write_text(f"{waited + time.time() - since} 0")


def _through_gate(f: Any, op: int) -> None:
    """Takes `op` on the lock `f` once no timer is waiting (the gate is passed, not kept)."""
    assert LOCK_PATH is not None
    with open(LOCK_PATH + GATE_SUFFIX, "a") as gate:
        _flock(gate, fcntl.LOCK_EX)
        try:
            _flock(f, op)
        finally:
            fcntl.flock(gate, fcntl.LOCK_UN)


def hold_shared() -> None:
    """Marks this process as using the GPU until it exits (or times, which takes the lock exclusively)."""
    if LOCK_PATH is not None and getattr(_local, "shared", None) is None:
        f = open(LOCK_PATH, "a")  # noqa: SIM115 - held for the life of the process
        _through_gate(f, fcntl.LOCK_SH)
        _local.shared = f


@contextlib.contextmanager
def exclusive() -> Iterator[None]:
    """Nothing else on the GPU (among runs sharing LOCK_PATH) inside; re-entrant."""
    if LOCK_PATH is None or getattr(_local, "depth", 0):
        _local.depth = getattr(_local, "depth", 0) + 1
        try:
            yield
        finally:
            _local.depth -= 1
        return
    shared = getattr(_local, "shared", None)
    f = shared or open(LOCK_PATH, "a")  # noqa: SIM115
    if shared is not None:  # let go first: holding it while queueing at the gate could deadlock another timer
        fcntl.flock(f, fcntl.LOCK_UN)
    _through_gate(f, fcntl.LOCK_EX)
    _local.depth = 1
    try:
        yield
    finally:
        _local.depth = 0
        if shared is None:
            fcntl.flock(f, fcntl.LOCK_UN)
            f.close()
        else:
            fcntl.flock(f, fcntl.LOCK_UN)
            _through_gate(f, fcntl.LOCK_SH)


@dataclass
class Timing:
    median_s: float
    mean_s: float
    min_s: float
    stdev_s: float
    trials: int
    host_median_s: float  # host clock around the call and a device-wide sync
    device: str
    # how long the device stays busy after the timed stream's end event has completed: work left running on
    # another stream (the host clock alone also counts a slow host's launch overhead, which a loaded host
    # running other verifications showed as a 2.5x gap on a genuine two-kernel module)
    tail_median_s: float = 0.0
    # each trial's device seconds in turn order: trial i of every contender ran in the same turn, so
    # paired ratios between contenders cancel the drift a turn shares (`paired_quartiles`)
    trials_s: tuple[float, ...] = ()
    output: Any = None  # the last timed call's output on the first input set, where the watch keeps it

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "output"}


def _flusher(device: torch.device) -> Callable[[], None]:
    if device.type == "cuda":
        buf = torch.empty(L2_FLUSH_BYTES, dtype=torch.uint8, device=device)
        return lambda: buf.zero_()

    size = int(2 * detect_cpu().chip("l2_bytes"))  # twice the last-level cache
    buf = torch.empty(size, dtype=torch.uint8)
    return lambda: buf.fill_(1)


def time_callable(fn: Callable[..., Any], input_sets: Sequence[Sequence[Any]], device: torch.device,
                  trials: int | None = None, warmup: int = 3) -> Timing:
    """One callable timed alone (what it raises, raised)."""
    got = time_interleaved({"": fn}, input_sets, device, trials, warmup)[""]
    if isinstance(got, Exception):
        raise got
    return got


@dataclass(frozen=True)
class Watch:
    """What the verifier checks while a candidate is timed: `after_turn` runs between turns, outside every
    timed window (it raises to stop the timing: the harness was tampered with); the contender named `keep`
    has the output of its last timed call on the first input set kept (`Timing.output`), so what ran
    under the clock is checked too, not only what ran under the verifier's eye."""

    after_turn: Callable[[], None] | None = None
    keep: str | None = None


def time_interleaved(fns: dict[str, Callable[..., Any]], input_sets: Sequence[Sequence[Any]], device: torch.device,
                     trials: int | None = None, warmup: int = 3, watch: Watch = Watch()
                     ) -> dict[str, Timing | Exception]:
    """Several contenders (a candidate and its baselines) timed in turns: trial i runs each of them once,
    in the i-th of `balanced_orders`, so a device or host whose pace drifts during the run moves all of them
    alike (timed as blocks, one contender's trials then the next's, the drift between blocks decides
    close comparisons). A contender that raises is dropped from later turns; its entry is the exception."""
    with exclusive():
        return _time_turns(fns, input_sets, device, trials, warmup, watch)


def default_trials(gpu: bool) -> int:
    """The turns a timing takes where its caller names none."""
    return 100 if gpu else 10


def balanced_orders(n: int) -> list[list[int]]:
    """Williams' design: orders of n contenders in which each runs in each place equally often and right
    after each other one equally often (n orders, 2n where n is odd). What a contender leaves behind falls
    on all the others alike: a generated kernel's OpenMP threads still spinning after it returns slowed
    whichever contender ran next, and a rotated fixed order always put the same one next (a library call
    identical to eager's read slower when it followed the pure module in four turns of five)."""
    base, lo, hi = [0], 1, n - 1
    while len(base) < n:
        base.append(lo)
        lo += 1
        if len(base) < n:
            base.append(hi)
            hi -= 1
    rows = [[(x + j) % n for x in base] for j in range(n)]
    return rows + ([[(x + j) % n for x in reversed(base)] for j in range(n)] if n % 2 else [])


# glibc's mallopt parameters, and the limits set for CPU timing
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
STEADY_MMAP_BYTES = 1 << 30


@functools.cache
def steady_heap() -> bool:
    """CPU timing in a process whose large allocations reuse a warm heap. glibc does that by itself for
    blocks under its dynamic mmap threshold (at most 32 MiB); a larger output is mapped fresh on every
    call and pays a page fault per page, or, when the heap's top happens to have room, does not: the same
    call times several-fold apart depending on what ran before, so two contenders could be timed in
    different modes. Every contender (eager, torch.compile, the candidate) is timed under this one
    policy, the one glibc applies below 32 MiB. False where the C library has no mallopt (not glibc)."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    return bool(mallopt(M_MMAP_THRESHOLD, STEADY_MMAP_BYTES) and mallopt(M_TRIM_THRESHOLD, 2 * STEADY_MMAP_BYTES - 1))


def _time_turns(fns: dict[str, Callable[..., Any]], input_sets: Sequence[Sequence[Any]], device: torch.device,
                trials: int | None, warmup: int, watch: Watch) -> dict[str, Timing | Exception]:
    gpu = device.type == "cuda"
    if not gpu:
        steady_heap()
    trials = trials or default_trials(gpu)
    flush = _flusher(device)
    failed: dict[str, Exception] = {}
    for name, fn in fns.items():
        try:
            for i in range(warmup):
                fn(*input_sets[i % len(input_sets)])
            if gpu:
                _sync()
        except Exception as e:  # noqa: BLE001 - reported as this contender's result
            failed[name] = e
    dev: dict[str, list[float]] = {n: [] for n in fns}
    host: dict[str, list[float]] = {n: [] for n in fns}
    tail: dict[str, list[float]] = {n: [] for n in fns}
    names = list(fns)
    orders = balanced_orders(len(names))
    kept = None
    for i in range(trials):
        args = input_sets[i % len(input_sets)]
        _vary(args, i // len(input_sets))
        for name in (names[j] for j in orders[i % len(orders)]):
            if name not in failed:
                try:
                    d, h, tl, got = _one_trial(fns[name], args, flush, gpu)
                except Exception as e:  # noqa: BLE001
                    failed[name] = e
                    continue
                if name == watch.keep and i % len(input_sets) == 0:
                    kept = got
                del got
                dev[name].append(d)
                host[name].append(h)
                tail[name].append(tl)
        if watch.after_turn is not None:
            watch.after_turn()
    out: dict[str, Timing | Exception] = {}
    for name in fns:
        ds = dev[name]
        out[name] = failed[name] if name in failed else Timing(
            _median(ds), _fmean(ds), min(ds), _pstdev(ds) if len(ds) > 1 else 0.0,
            trials, _median(host[name]), device.type, _median(tail[name]), tuple(ds),
            kept if name == watch.keep else None)
    return out


# a second instance of the reference timed as one more contender: its paired speedups over eager are what
# the host's noise alone makes of two identical calls (an A/A control), the band a candidate is held to
AA_BASELINE = "eager-again"


def paired_quartiles(base_s: Sequence[float], cand_s: Sequence[float]) -> tuple[float, float] | None:
    """The lower and upper quartiles of base/candidate over the turns both ran in (trial i of each in
    turn i): the spread of a speedup once the host's drift, which both saw, is divided out. An upper
    quartile below 1.0 says the candidate was slower in at least three turns of four."""
    ratios = [b / c for b, c in zip(base_s, cand_s) if c > 0]
    if len(ratios) < 4:
        return None
    q = statistics.quantiles(ratios, n=4, method="inclusive")
    return q[0], q[2]


def _vary(args: Sequence[Any], use: int) -> None:
    """An input set's floating-point tensors doubled on its odd uses and halved back on its even ones (exact in
    binary floating point, the sign and range kept): the same buffers hold other values from turn to turn,
    so a contender that keeps answers by buffer (its address, its version) returns a stale one, which the
    verifier's check of the timed output catches, instead of skipping work the others do."""
    if use == 0:
        return
    for x in args:
        if isinstance(x, torch.Tensor) and x.is_floating_point():
            x.mul_(2.0 if use % 2 else 0.5)


def _one_trial(fn: Callable[..., Any], args: Sequence[Any], flush: Callable[[], None], gpu: bool
               ) -> tuple[float, float, float, Any]:
    """(device seconds, host seconds, device seconds after the timed stream's end, what it returned) of one
    call after a cache flush."""
    flush()
    if gpu:
        _sync()
        start, end = _Event(enable_timing=True), _Event(enable_timing=True)
        t0 = _clock()
        _record(start)
        out = fn(*args)
        _record(end)
        _event_sync(end)  # the timed stream is done ...
        t1 = _clock()
        _sync()  # ... and the device-wide sync waits for whatever else still runs
        t2 = _clock()
        return _elapsed(start, end) / 1e3, t2 - t0, t2 - t1, out
    t0 = _clock()
    out = fn(*args)
    took = _clock() - t0
    return took, took, 0.0, out


def side_stream_suspected(t: Timing) -> bool:
    """The device stayed busy after the timed stream finished, for a good part of what the events saw:
    work ran outside the timed stream (a host slow to launch, which the host clock also shows, is not)."""
    return t.device == "cuda" and t.tail_median_s > 0.5 * t.median_s + 50e-6
