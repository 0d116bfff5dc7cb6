"""How well does the cost model rank schedules? Times N schedules of one GEMM kernel on the device
(each verified and timed in the sandbox, with the one timing protocol) and reports Spearman's rho
between the model's estimates and the measured medians."""

from __future__ import annotations

import math
import tempfile
from pathlib import Path
from typing import Any

from dsl_backends import get_backend
from ir.errors import AkgError

from ..ranking import estimated
from ..translate import build, render
from ..verifier import verify


def spearman(x: list[float], y: list[float]) -> float:
    def ranks(v: list[float]) -> list[float]:
        order = sorted(range(len(v)), key=lambda i: v[i])
        r = [0.0] * len(v)
        i = 0
        while i < len(order):
            j = i
            while j + 1 < len(order) and v[order[j + 1]] == v[order[i]]:
                j += 1
            for t in range(i, j + 1):
                r[order[t]] = (i + j) / 2.0  # ties share their mean rank
            i = j + 1
        return r

    rx, ry = ranks(x), ranks(y)
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    cov = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    sx = math.sqrt(sum((a - mx) ** 2 for a in rx))
    sy = math.sqrt(sum((b - my) ** 2 for b in ry))
    return cov / (sx * sy) if sx and sy else 0.0


def rank_schedules(problem: str, target: str, dsl: str, n: int = 16, trials: int = 50) -> dict[str, Any]:
    t = build(problem, dsl, target, tuned=False)  # the generated GEMM's schedules, whatever a translate would pick
    if t.executor != "native":
        raise AkgError(f"ranking schedules needs the {target} device here (executor: {t.executor})")
    gemms = [k for k in t.program.kernels() if k.kind == "matmul"]
    if not gemms:
        raise AkgError(f"{Path(problem).name} has no GEMM kernel to rank schedules of")
    k = max(gemms, key=lambda k: k.out.numel)
    grp = next(g for g in t.plan.groups if g.id == k.group)
    space = get_backend(dsl).tuning_space(k, t.target)
    cands = [(e.time_s, s) for e, s in estimated(grp, t.target, space, get_backend(dsl)) if math.isfinite(e.time_s)]
    if not cands:
        raise AkgError(f"the {dsl} tuning space of {k.name} has no tile schedule the cost model can estimate")
    cands.sort(key=lambda c: c[0])
    picks = [cands[round(i * (len(cands) - 1) / max(1, n - 1))] for i in range(min(n, len(cands)))]
    rows = []
    with tempfile.TemporaryDirectory(prefix="akg-rank-") as d:
        for est, s in picks:
            t.schedules[k.name] = s
            path = Path(d) / f"cand_{len(rows)}.py"
            path.write_text(render(t))
            v = verify(t.problem, path, target=target, seeds=(0, 1), timing=True, trials=trials, sol_check=False)
            med = v.details.get("timing", {}).get("candidate", {}).get("median_s") if v.accepted else None
            rows.append({"schedule": dict(s), "estimate_ms": est * 1e3, "measured_ms": med * 1e3 if med else None,
                         "verdict": v.line()})
    ok = [r for r in rows if r["measured_ms"]]
    rho = spearman([r["estimate_ms"] for r in ok], [r["measured_ms"] for r in ok]) if len(ok) > 2 else None
    return {"problem": str(problem), "target": target, "dsl": dsl, "kernel": k.name, "schedules": rows,
            "spearman_rho": rho, "measured": len(ok)}
