"""Port every module of the folders given (default: the Triton and Pallas suites in tests/port_kernels/)
to each (DSL, target) pair with `akg port` and record, per port, whether the verifier accepted it against
the original, how many kernels were written, and the time against the original where the target's
device is here.

    python benchmarks/port_matrix.py --pairs cpp:cpu,pallas:tpu-v5p,cuda-c:h200,triton:h200 --out runs/port

writes OUT.json (records and `meta`: commit, versions, machine, command) and OUT.txt (a table)."""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from akg_agent.bench.provenance import provenance  # noqa: E402
from akg_agent.port import port  # noqa: E402
from ir.errors import AkgError  # noqa: E402


def one(module: Path, dsl: str, target: str, work: Path) -> dict:
    t0 = time.perf_counter()
    rec: dict = {"kernel": module.stem, "dsl": dsl, "target": target}
    try:
        p = port(module, dsl, target, work / f"{module.stem}_{dsl}_{target}.py")
    except AkgError as e:
        return rec | {"ok": False, "reason": str(e)[:400], "wall_s": round(time.perf_counter() - t0, 1)}
    t = p.translation
    v = t.verdict
    timing = (v.details.get("timing") or {}) if v is not None else {}
    cand = timing.get("candidate", {}).get("median_s")
    orig = timing.get("eager", {}).get("median_s")
    return rec | {"ok": v.accepted if v is not None else None, "executor": t.executor,
                  "checked": v.line() if v is not None else (t.compiled or "written, not run"),
                  "launches_lifted": len(p.kernels), "kernels_written": len(t.program.kernels()),
                  "library_calls": [s.op for s in t.program.library_calls()],
                  "port_s": cand, "original_s": orig,
                  "speedup": round(orig / cand, 3) if cand and orig else None,
                  "wall_s": round(time.perf_counter() - t0, 1)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folders", nargs="*", default=[str(ROOT / "tests" / "port_kernels"),
                                                   str(ROOT / "tests" / "port_kernels" / "pallas")])
    ap.add_argument("--pairs", default="cpp:cpu,pallas:tpu-v5p,cuda-c:h200,triton:h200")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    pairs = [tuple(p.split(":", 1)) for p in args.pairs.split(",")]
    modules = [p for folder in args.folders for p in sorted(Path(folder).glob("*.py"))]
    records = []
    with tempfile.TemporaryDirectory() as tmp:
        for m in modules:
            for dsl, target in pairs:
                r = one(m, dsl, target, Path(tmp))
                records.append(r)
                print(json.dumps(r), flush=True)
    meta = provenance() | {"date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
                           "dsl": "several", "set": "port", "pairs": [f"{d}:{t}" for d, t in pairs]}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps({"meta": meta, "records": records}, indent=1))
    lines = [f"{'kernel':<24} {'dsl':<8} {'target':<8} {'ok':<5} {'kernels':>7} {'speedup':>8}  checked"]
    for r in records:
        lines.append(f"{r['kernel']:<24} {r['dsl']:<8} {r['target']:<8} {str(r['ok']):<5} "
                     f"{r.get('kernels_written', '-'):>7} {r.get('speedup') or '-':>8}  "
                     f"{(r.get('checked') or r.get('reason') or '')[:90]}")
    ok = sum(1 for r in records if r["ok"] is not False)
    lines.append(f"{ok} of {len(records)} ports accepted (or compiled where the target's device is not here)")
    out.with_suffix(".txt").write_text("\n".join(lines) + "\n")
    print(lines[-1])
    return 0 if ok == len(records) else 1


if __name__ == "__main__":
    sys.exit(main())
