"""Two `benchmarks/gpu/ray_gpus.sh` folders (one GPU, several) side by side: wall time per program, the
tune's own elapsed time, candidates per device, each kernel's choice in both, and whether the choices
agree; the schedules' times as measured, so the choice can be re-derived.

    python benchmarks/gpu/ray_compare.py runs/g1 runs/g2 OUT.json
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from pathlib import Path
from typing import Any


def _report(path: Path) -> dict[str, Any]:
    """The JSON report `akg tune --json` printed after its progress lines."""
    text = path.read_text()
    start = re.search(r"^[\[{]$", text, re.M)
    if start is None:
        raise SystemExit(f"{path}: no JSON report in it (see {path.with_suffix('.err')})")
    rep = json.loads(text[start.start():])
    return rep[0] if isinstance(rep, list) else rep


def _walls(folder: Path) -> dict[str, float]:
    """Wall seconds of each program whose tune finished (rc=0; one cut by the run's limit is left out)."""
    rows = (line.split() for line in (folder / "wall.txt").read_text().splitlines())
    return {r[0]: int(r[r.index("ms") - 1]) / 1e3 for r in rows if "ms" in r and (r[0] == "all" or r[1] == "rc=0")}


def _run(folder: Path) -> dict[str, dict[str, Any]]:
    walls = _walls(folder)
    out = {}
    for f in sorted(folder.glob("*.json")):
        if f.stem not in walls:
            continue
        rep = _report(f)
        out[f.stem] = {"wall_s": walls.get(f.stem), "elapsed_s": round(rep["elapsed_s"], 2),
                       "measured": rep["measured"], "lost": len(rep["lost"]),
                       "timed_on": dict(Counter(c["device"] for c in rep["candidates"])),
                       "best": {k["kernel"]: k["best"] for k in rep["kernels"]},
                       "candidates_ms": [[c["kernel"], c["schedule"], round(c["median_s"] * 1e3, 4) if c["median_s"]
                                          else None, c["device"]] for c in rep["candidates"]]}
    out["all"] = {"wall_s": walls.get("all")}
    return out


def compare(one: Path, many: Path) -> dict[str, Any]:
    a, b = _run(one), _run(many)
    rows, common = {}, sorted(a.keys() & b.keys() - {"all"})
    for name in common:
        rows[name] = {"speedup_wall": round(a[name]["wall_s"] / b[name]["wall_s"], 2),
                      "speedup_elapsed": round(a[name]["elapsed_s"] / b[name]["elapsed_s"], 2),
                      "same_choice": a[name]["best"] == b[name]["best"]}
    # over the programs both runs finished: a run cut by its time limit has more or fewer of them
    walls = [sum(run[n]["wall_s"] for n in common) for run in (a, b)]
    return {"one_gpu": a, "gpus": b, "compare": rows, "wall_s_common": [round(w, 1) for w in walls],
            "speedup_wall_all": round(walls[0] / walls[1], 2) if common else None}


if __name__ == "__main__":
    doc = compare(Path(sys.argv[1]), Path(sys.argv[2]))
    Path(sys.argv[3]).write_text(json.dumps(doc, indent=1))
    print(json.dumps({"compare": doc["compare"], "speedup_wall_all": doc["speedup_wall_all"]}, indent=1))
