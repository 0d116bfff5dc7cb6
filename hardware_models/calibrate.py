"""`akg hw calibrate`: measure the present device and store a profile the cost model then prefers.

Measured: memory bandwidth (DRAM: a copy's or a read's, the faster), matrix-multiply rate per dtype and
unit (on a CPU: the library's GEMM and the cores' FMA peak, `fma_peak`), and launch latency: warm-up, then
the fastest of several trials (CUDA events on the GPU, perf_counter on the CPU). A figure here is what the
device can do, and another process on the host only ever slows a trial down, so the fastest trial
estimates it; a median taken on a busy host stored a rate many times too low.
"""

from __future__ import annotations

import datetime as _dt
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from ir.errors import AkgError

from .fma_peak import fma_peak
from .spec import apply_calibration, calibrated_path, load_target

# the device-name fragment each GPU target expects (guards against calibrating an H200 as an H100)
DEVICE_NAMES = {"h100": "H100", "h200": "H200", "a100": "A100", "l40s": "L40S", "b200": "B200",
                "mi300x": "MI300X"}


def _time_cuda(fn: Callable[[], Any], trials: int, warmup: int = 3) -> float:
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(trials):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return min(times)


def _time_cpu(fn: Callable[[], Any], trials: int, warmup: int = 2) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(trials):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def memory_bandwidth(device: str, n: int, timer: Callable[..., float], trials: int) -> float:
    """The faster of a copy (read + write) and a read alone (a sum) over `n` floats: a copy's plain stores
    also read their destination first on a CPU, traffic it does not count, so a kernel with streaming
    stores moved its bytes faster than a copy-only figure allowed and was rejected as beating the bound."""
    src = torch.empty(n, dtype=torch.float32, device=device).uniform_()
    dst = torch.empty_like(src)
    return max(2 * src.nbytes / timer(lambda: dst.copy_(src), trials), src.nbytes / timer(src.sum, trials))


def cpu_bandwidth_now(trials: int = 5) -> float:
    """The host's memory bandwidth at this moment (a VM's varies with its neighbours' load, by about
    two-fold on this project's host: README)."""
    return memory_bandwidth("cpu", 1 << 25, _time_cpu, trials)


def measure(device: str, quick: bool = False) -> dict[str, float]:
    """Measured figures, keyed like the data files ('memory.dram_bw', 'compute.tensor.bf16', ...)."""
    gpu = device == "cuda"
    timer = _time_cuda if gpu else _time_cpu
    trials = 9 if quick else (20 if gpu else 7)
    out: dict[str, float] = {}
    n = (1 << 28 if gpu else 1 << 25) // (4 if quick else 1)  # f32 elements: 1 GiB on the GPU
    out["memory.dram_bw"] = memory_bandwidth(device, n, timer, trials)
    size = (8192 if not quick else 2048) if gpu else (1024 if not quick else 256)
    dtypes = {"bf16": torch.bfloat16, "f16": torch.float16} if gpu else {}
    for name, dt in dtypes.items():
        a = torch.randn(size, size, device=device, dtype=dt)
        b = torch.randn(size, size, device=device, dtype=dt)
        out[f"compute.tensor.{name}"] = 2 * size**3 / timer(lambda: a @ b, trials)
    a = torch.randn(size, size, device=device)
    b = torch.randn(size, size, device=device)
    if gpu:
        old = torch.backends.cuda.matmul.allow_tf32
        try:
            torch.backends.cuda.matmul.allow_tf32 = False
            out["compute.vector.f32"] = 2 * size**3 / timer(lambda: a @ b, trials)
            torch.backends.cuda.matmul.allow_tf32 = True
            out["compute.tensor.tf32"] = 2 * size**3 / timer(lambda: a @ b, trials)
        finally:
            torch.backends.cuda.matmul.allow_tf32 = old
        x = torch.zeros(1, device=device)
        reps = 1000

        def launches() -> None:
            for _ in range(reps):
                x.add_(1)

        out["chip.launch_overhead_s"] = timer(launches, 5) / reps
    else:
        out["library.gemm_rate"] = 2 * size**3 / timer(lambda: a @ b, trials)
    return out


def cpu_peaks(model: Any, quick: bool) -> dict[str, float]:
    """The detected model's compute figures (vector and dot-product, all cores x clock x lanes x pipes)
    scaled by the measured fp32 FMA peak over the detected one: the clock correction. {} where nothing
    compiles the measurement."""
    measured, detected = fma_peak(quick), model.peak("vector", "f32")
    if not measured or not detected:
        return {}
    return {f"{section}.{key}": f.value * measured / detected for section in ("compute.vector", "compute.tensor")
            for key, f in model.figures.get(section, {}).items()}


def calibrate(target: str, force: bool = False, quick: bool = False, path: Path | None = None,
              more: Callable[[Any, bool], dict[str, float]] | None = None) -> dict[str, Any]:
    """`more(model, quick)`: figures measured by a caller that knows more than the hardware (the
    backends' own GEMMs), stored beside the measured ones."""
    model = load_target(target, calibrated=False)
    if model.kind == "cpu":
        device, name = "cpu", model.description
    else:
        if model.vendor not in ("nvidia", "amd"):
            raise AkgError(f"akg cannot calibrate {target} from Python here; measure it on the device and "
                           "write the profile by hand")
        if not torch.cuda.is_available():
            raise AkgError(f"no GPU visible to torch: run `akg hw calibrate --target {target}` on a machine with "
                           f"an {model.description}")
        device, name = "cuda", torch.cuda.get_device_name()
        want = DEVICE_NAMES.get(target, "")
        if want not in name and not force:
            raise AkgError(f"this device is {name!r}, not {want}: pick the matching --target or pass --force")
    figures = measure(device, quick=quick)
    if model.kind == "cpu":
        peaks = cpu_peaks(model, quick)
        figures.update(peaks)
        model = apply_calibration(model, {"figures": peaks})
        # torch's GEMM rate is the library's, not the cores' peak: the cost model weighs it against a
        # generated GEMM's (manifest gemm_efficiency, `more`), both fractions of the peak
        rate, peak = figures.pop("library.gemm_rate"), model.peak("vector", "f32")
        if peak:
            figures["library.gemm_f32"] = rate / peak
    if more is not None:
        figures.update(more(model, quick))
    doc = {"target": target, "device": name, "date": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
           "torch": torch.__version__, "figures": figures}
    out = path or calibrated_path(target)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=2))
    doc["path"] = str(out)
    return doc
