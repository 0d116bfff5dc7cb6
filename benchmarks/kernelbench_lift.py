"""Lifts every KernelBench program at its full size (fake inputs: no memory, no compute) and records
which lift, how long each took, and the one-line error of those that do not.
python benchmarks/kernelbench_lift.py KERNELBENCH_DIR OUT.json   (KERNELBENCH_DIR holds level1..level3)"""

from __future__ import annotations

import json
import signal
import sys
import time
from pathlib import Path

from ir.errors import AkgError
from ir.lift import lift
from ir.passes import run_passes
from ir.problem import load_problem

LIMIT_S = 60


def _alarm(signum, frame):  # noqa: ANN001
    raise TimeoutError(f"lifting took over {LIMIT_S} s")


def main(root: str, out: str) -> None:
    signal.signal(signal.SIGALRM, _alarm)
    rows = []
    for level in ("level1", "level2", "level3"):
        for path in sorted((Path(root) / level).glob("*.py")):
            t0 = time.perf_counter()
            signal.alarm(LIMIT_S)
            try:
                g = lift(load_problem(path))
                run_passes(g, "simplify,fuse")
                row = {"ok": True, "nodes": len(g.nodes), "groups": len(g.plan.groups) if g.plan else None}
            except (AkgError, TimeoutError) as e:
                row = {"ok": False, "error": str(e).splitlines()[0][:300]}
            except Exception as e:  # noqa: BLE001 - a crash is a finding too, recorded in one line
                row = {"ok": False, "error": f"crash: {type(e).__name__}: {str(e).splitlines()[0][:250]}"}
            finally:
                signal.alarm(0)
            row.update(level=level, problem=path.name, lift_s=round(time.perf_counter() - t0, 2))
            rows.append(row)
            print(json.dumps(row), flush=True)
    summary = {lv: f"{sum(r['ok'] for r in rows if r['level'] == lv)}/{sum(r['level'] == lv for r in rows)}"
               for lv in ("level1", "level2", "level3")}
    slowest = sorted(rows, key=lambda r: -r["lift_s"])[:5]
    Path(out).write_text(json.dumps({"summary": summary, "slowest": slowest, "rows": rows}, indent=1))
    print(json.dumps(summary))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
