"""Profile feedback for the optimise step. On an NVIDIA GPU with Nsight Compute: per-kernel
speed-of-light %, DRAM throughput, achieved occupancy and the main warp-stall reasons, from `ncu` run
on the candidate inside the verifier's sandbox. Elsewhere: the cost model's gap, group by group."""

from __future__ import annotations

import csv
import io
import shutil
from pathlib import Path
from typing import Any

from ..verifier.sandbox import Limits, run_job
from .plan import Plan
from .trace import Attempt

METRICS = {
    "gpu__time_duration.sum": "duration_us",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed": "sm_sol_pct",
    "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed": "mem_sol_pct",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed": "dram_pct",
    "sm__warps_active.avg.pct_of_peak_sustained_active": "occupancy_pct",
    "launch__registers_per_thread": "registers",
}
STALLS = ("long_scoreboard", "short_scoreboard", "barrier", "mio_throttle", "lg_throttle", "math_pipe_throttle",
          "wait", "not_selected", "membar", "no_instruction")
STALL_METRIC = "smsp__average_warps_issue_stalled_{}_per_issue_active.ratio"


def ncu_command() -> list[str]:
    names = list(METRICS) + [STALL_METRIC.format(s) for s in STALLS]
    return ["ncu", "--csv", "--profile-from-start", "off", "--metrics", ",".join(names), "--log-file",
            "{run_dir}/ncu.csv", "--target-processes", "all"]


def parse_ncu_csv(text: str) -> list[dict[str, Any]]:
    """ncu --csv (one row per kernel and metric) -> one dict per kernel launch, in launch order."""
    start = text.find('"ID"')
    if start < 0:
        return []
    kernels: dict[str, dict[str, Any]] = {}
    for row in csv.DictReader(io.StringIO(text[start:])):
        k = kernels.setdefault(row["ID"], {"kernel": row.get("Kernel Name", "?"), "stalls": {}})
        name, raw = row.get("Metric Name", ""), row.get("Metric Value", "").replace(",", "")
        try:
            val = float(raw)
        except ValueError:
            continue
        if name in METRICS:
            unit = row.get("Metric Unit", "")
            timed = name.startswith("gpu__time")
            scale = {"nsecond": 1e-3, "ns": 1e-3, "msecond": 1e3, "ms": 1e3, "second": 1e6, "s": 1e6}.get(unit, 1.0) \
                if timed else 1.0
            k[METRICS[name]] = val * scale
        else:
            for s in STALLS:
                if name == STALL_METRIC.format(s):
                    k["stalls"][s] = val
    return list(kernels.values())


def summarize_ncu(kernels: list[dict[str, Any]], top: int = 6) -> str:
    lines = ["Nsight Compute, per kernel (slowest first):"]
    for k in sorted(kernels, key=lambda k: -k.get("duration_us", 0))[:top]:
        stalls = sorted(k["stalls"].items(), key=lambda kv: -kv[1])[:3]
        st = ", ".join(f"{n} {v:.2g}" for n, v in stalls if v > 0)
        name = k["kernel"][:60]
        lines.append(f"- {name}: {k.get('duration_us', 0):.3g} us; compute SOL {k.get('sm_sol_pct', 0):.0f}%, "
                     f"memory SOL {k.get('mem_sol_pct', 0):.0f}%, DRAM {k.get('dram_pct', 0):.0f}%, achieved "
                     f"occupancy {k.get('occupancy_pct', 0):.0f}%, {k.get('registers', 0):.0f} registers/thread"
                     + (f"; top stalls (cycles per issue): {st}" if st else ""))
    return "\n".join(lines)


def ncu_profile(problem: Path, cand: Path, timeout_s: float = 300) -> list[dict[str, Any]] | None:
    """Kernels of one forward call under ncu, or None where there is no ncu or no NVIDIA GPU."""
    import torch

    if shutil.which("ncu") is None or not torch.cuda.is_available():
        return None

    job = {"ref": str(Path(problem).resolve()), "cand": str(Path(cand).resolve()), "device": "cuda",
           "profile": {"iters": 1}, "prefix": ncu_command(), "collect": ["ncu.csv"]}
    res = run_job(job, Limits(timeout_s=timeout_s))
    text = res.get("details", {}).get("ncu.csv")
    return parse_ncu_csv(text) if text else None


def cost_gap(att: Attempt, plan: Plan) -> str:
    """The cost model's view: how far the measured time is from speed-of-light, and where the model
    expects the time to go."""
    lines = [att.line()]
    if plan.sol_ms:
        lines.append(f"speed-of-light for the program: {plan.sol_ms:.4g} ms"
                     + (f"; goal {plan.goal_ms:.4g} ms" if plan.goal_ms else ""))
    est = sorted((g for g in plan.groups if g.est_ms is not None), key=lambda g: -(g.est_ms or 0))
    if est:
        lines.append("cost-model estimate per fusion group (largest first):")
        lines += [f"- group {g.group} [{g.kind}] {' '.join(g.ops)}: {g.est_ms:.3g} ms ({g.strategy})" for g in est]
    return "\n".join(lines)


def feedback(att: Attempt, plan: Plan, problem: Path, cand: Path, use_ncu: bool = True) -> tuple[str, str]:
    """(text, source): the profile when ncu can run here, else the cost model's gap."""
    gap = cost_gap(att, plan)
    kernels = ncu_profile(problem, cand) if use_ncu else None
    if kernels:
        return gap + "\n" + summarize_ncu(kernels), "ncu"
    return gap, "cost-model"
