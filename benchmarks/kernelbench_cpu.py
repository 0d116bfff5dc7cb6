"""KernelBench shrunk to CPU size, translated to C++ (or another DSL) and verified, one problem at a
time in its own process with a time limit; records verdicts, times and one-line errors.

python benchmarks/kernelbench_cpu.py KERNELBENCH_DIR OUT.json [--dsl cpp --target cpu] [--every N]
    [--only level3/35_LSTM.py,...]
python benchmarks/kernelbench_cpu.py KERNELBENCH_DIR DIR --write-only [--every N]
    (the shrunk problems alone, for `akg bench --dsl cpp --target cpu --baselines eager,compile DIR/level1 ...`)

How a problem is shrunk (its module-level test configuration, nothing else): every integer constant
assigned at module level (alone or inside a tuple or list) named like a batch size becomes 2, unless
another constant holds the same value (a program may rely on the two being equal); other integers
above 32 are divided by 8 (at least 8), those up to 32 are kept (kernel sizes, strides, layer and head
counts, small channel counts). Floats, code and `get_init_inputs` stay as written. Where the shrunk
program no longer builds or runs (a size it derives stops matching one it states, channels stop dividing
into groups), the batch alone is shrunk
(`"shrink": "batch"` in its row).
"""

from __future__ import annotations

import argparse
import ast
import json
import subprocess
import sys
import time
from pathlib import Path

LIMIT_S = 600


def _int_constants(tree: ast.Module) -> list[tuple[str, ast.Constant]]:
    out = []
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            out += [(node.targets[0].id, c) for c in ast.walk(node.value)
                    if isinstance(c, ast.Constant) and type(c.value) is int]
    return out


def shrink_source(src: str, mode: str = "sizes") -> str:
    """`mode`: "sizes" (the rule above) or "batch" (batch sizes only)."""
    consts = _int_constants(ast.parse(src))
    shared = {v for v in (c.value for n, c in consts if "batch" not in n.lower())}
    edits = []
    for name, c in consts:
        v = c.value
        if "batch" in name.lower() and v not in shared:
            new = min(v, 2)
        elif mode == "sizes":
            new = v if v <= 32 else max(v // 8, 8)
        else:
            continue
        edits.append((c.lineno, c.col_offset, c.end_lineno, c.end_col_offset, str(new)))
    lines = src.splitlines(keepends=True)
    for ln, col, eln, ecol, text in sorted(edits, reverse=True):
        if ln == eln:
            lines[ln - 1] = lines[ln - 1][:col] + text + lines[ln - 1][ecol:]
    return "".join(lines)


RUN = """
import json, sys, time
from akg_agent.translate import translate
t0 = time.perf_counter()
try:
    t = translate(sys.argv[1], sys.argv[2], sys.argv[3], timing=False, seeds=(0, 1))
    row = {"ok": bool(t.verdict.accepted), "kernels": len(t.schedules)}
except Exception as e:
    row = {"ok": False, "error": f"{type(e).__name__}: {str(e).splitlines()[0][:300]}"}
row["translate_s"] = round(time.perf_counter() - t0, 2)
print("ROW " + json.dumps(row))
"""


BUILDS = """
import importlib.util, sys, torch
spec = importlib.util.spec_from_file_location("p", sys.argv[1]); m = importlib.util.module_from_spec(spec)
spec.loader.exec_module(m)
with torch.no_grad():
    m.Model(*m.get_init_inputs())(*m.get_inputs())
"""


def write_shrunk(path: Path, dst: Path) -> str:
    """The shrunk program written to `dst`: its sizes shrunk where it still builds and runs, else its batch."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    for mode in ("sizes", "batch"):
        dst.write_text(shrink_source(path.read_text(), mode))
        try:
            if subprocess.run([sys.executable, "-c", BUILDS, str(dst)], capture_output=True,
                              timeout=LIMIT_S).returncode == 0:
                return mode
        except subprocess.TimeoutExpired:
            pass
    return "batch (does not run)"


def run_one(path: Path, dsl: str, target: str) -> dict:
    t0 = time.perf_counter()
    try:
        p = subprocess.run([sys.executable, "-c", RUN, str(path), dsl, target], capture_output=True, text=True,
                           timeout=LIMIT_S)
        rows = [ln[4:] for ln in p.stdout.splitlines() if ln.startswith("ROW ")]
        row = json.loads(rows[-1]) if rows else {
            "ok": False, "error": f"crash (exit {p.returncode}): {(p.stderr.strip().splitlines() or [''])[-1][:250]}"}
    except subprocess.TimeoutExpired:
        row = {"ok": False, "error": f"over {LIMIT_S} s"}
    row["wall_s"] = round(time.perf_counter() - t0, 2)
    return row


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("root")
    ap.add_argument("out")
    ap.add_argument("--dsl", default="cpp")
    ap.add_argument("--target", default="cpu")
    ap.add_argument("--every", type=int, default=1, help="every Nth problem of each level")
    ap.add_argument("--only", default="", help="comma-separated level/name.py")
    ap.add_argument("--write-only", action="store_true", help="OUT is a folder: the shrunk problems, not run")
    a = ap.parse_args()
    if a.write_only:
        for level in ("level1", "level2", "level3"):
            for i, path in enumerate(sorted((Path(a.root) / level).glob("*.py"))):
                if i % a.every == 0 and (not a.only or f"{level}/{path.name}" in a.only.split(",")):
                    print(level, path.name, write_shrunk(path, Path(a.out) / level / path.name), flush=True)
        return
    out = Path(a.out)
    shrunk = out.with_suffix("")  # the shrunk problems, beside the results
    only = {s for s in a.only.split(",") if s}
    done = {}
    if out.exists():  # resume: keep finished rows
        done = {(r["level"], r["problem"]): r for r in json.loads(out.read_text())["rows"]}
    rows = []
    for level in ("level1", "level2", "level3"):
        for i, path in enumerate(sorted((Path(a.root) / level).glob("*.py"))):
            if i % a.every or (only and f"{level}/{path.name}" not in only):
                continue
            row = done.get((level, path.name))
            if row is None:
                dst = shrunk / level / path.name
                dst.parent.mkdir(parents=True, exist_ok=True)
                for mode in ("sizes", "batch"):
                    dst.write_text(shrink_source(path.read_text(), mode))
                    row = dict(run_one(dst, a.dsl, a.target), level=level, problem=path.name, shrink=mode)
                    err = row.get("error", "")
                    if "could not trace" not in err and "Model(*get_init_inputs())" not in err:
                        break
                print(json.dumps(row), flush=True)
            rows.append(row)
            summary = {lv: f"{sum(r['ok'] for r in rows if r['level'] == lv)}/{sum(r['level'] == lv for r in rows)}"
                       for lv in ("level1", "level2", "level3")}
            out.write_text(json.dumps({"dsl": a.dsl, "target": a.target, "summary": summary, "rows": rows},
                                      indent=1))
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
