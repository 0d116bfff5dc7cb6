"""compute-sanitizer memcheck over written modules: every problem of the given folders is rendered for
each DSL (no verification: memcheck judges memory access, the verifier judges values), then one
sanitizer run per DSL calls each module's forward once on the GPU. Errors are attributed to the
module that was running when the sanitizer printed them.

python benchmarks/gpu/memcheck.py OUT.json --dsl triton,cuda-c DIR [DIR ...]
(`run MODS PROBLEMS...` is the mode the sanitizer wraps.)"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _load(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def warm(mods: str) -> None:
    """Modules compiled ahead, in parallel and outside the sanitizer (their caches serve the run)."""
    from concurrent.futures import ThreadPoolExecutor

    def one(path: Path) -> None:
        try:
            lib = getattr(_load(path), "_akg_lib", None)  # a module that compiles a library ahead
            if callable(lib):
                lib()
        except Exception:  # noqa: BLE001 - the sanitized run reports it
            pass

    with ThreadPoolExecutor(8) as ex:
        list(ex.map(one, sorted(Path(mods).glob("*.py"))))


def run(mods: str, problems: list[str]) -> int:
    """Each module's forward once on the GPU (under the sanitizer)."""
    import torch

    from ir.problem import load_problem

    by_name = {p.name: p for d in problems for p in Path(d).glob("*.py")}
    for path in sorted(Path(mods).glob("*.py")):
        print(f"@@begin {path.stem}", flush=True)
        try:
            prob = load_problem(by_name[path.name])
            ref = prob.build_model(0)
            m = _load(path).ModelNew(*prob.get_init_inputs())
            m.load_state_dict(ref.state_dict())
            m = m.cuda().eval()
            xs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in prob.make_inputs(0, "cuda")]
            with torch.no_grad():
                m(*xs)
            torch.cuda.synchronize()
            print(f"@@ran {path.stem}", flush=True)
        except Exception as e:  # noqa: BLE001 - report every module
            print(f"@@failed {path.stem}: {str(e).splitlines()[0][:300] if str(e) else type(e).__name__}", flush=True)
    return 0


def attribute(log: str) -> dict[str, dict]:
    """Per module: ran or failed, and the sanitizer's error lines printed while it ran."""
    rows: dict[str, dict] = {}
    cur = None
    for line in log.splitlines():
        if line.startswith("@@begin "):
            cur = line.split(" ", 1)[1]
            rows[cur] = {"ran": False, "errors": 0, "first_error": None, "failure": None}
        elif line.startswith("@@ran ") and cur:
            rows[cur]["ran"] = True
        elif line.startswith("@@failed ") and cur:
            rows[cur]["failure"] = line.split(": ", 1)[-1]
        elif cur and re.match(r"=+ (Invalid|Out-of-range|Misaligned|Program hit|Uninitialized|Address)", line):
            rows[cur]["errors"] += 1
            rows[cur]["first_error"] = rows[cur]["first_error"] or line.strip("= ")
    return rows


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "run":
        return run(sys.argv[2], sys.argv[3:])
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("dirs", nargs="+")
    ap.add_argument("--dsl", default="triton,cuda-c")
    ap.add_argument("--target", default="h100")
    a = ap.parse_args()
    from akg_agent.translate import build, render

    problems = sorted(p for d in a.dirs for p in Path(d).glob("*.py"))
    result: dict = {"target": a.target, "problems": [str(p) for p in problems], "dsls": {}}
    for dsl in a.dsl.split(","):
        with tempfile.TemporaryDirectory() as d:
            rendered: dict[str, str] = {}
            for p in problems:
                try:
                    (Path(d) / p.name).write_text(render(build(p, dsl, a.target)))
                except Exception as e:  # noqa: BLE001 - a problem the backend cannot write is listed
                    rendered[p.stem] = f"not written: {str(e).splitlines()[0][:200]}"
            warm(d)
            t0 = time.time()
            r = subprocess.run(["compute-sanitizer", "--tool", "memcheck", "--print-limit", "50", sys.executable,
                                __file__, "run", d, *a.dirs], capture_output=True, text=True,
                               env={**os.environ, "PYTHONPATH": f"{ROOT}:{os.environ.get('PYTHONPATH', '')}"})
            log = r.stdout + "\n" + r.stderr
            summary = re.findall(r"ERROR SUMMARY: (\d+) error", log)
            rows = attribute(r.stdout if "@@begin" in r.stdout else log)
            result["dsls"][dsl] = {"modules": rows, "not_written": rendered, "seconds": round(time.time() - t0, 1),
                                   "error_summary": int(summary[-1]) if summary else None, "exit": r.returncode,
                                   "log_tail": log[-3000:]}
            bad = [k for k, v in rows.items() if v["errors"] or not v["ran"]]
            print(f"{dsl}: {len(rows)} modules, {sum(v['ran'] for v in rows.values())} ran, "
                  f"sanitizer errors {summary[-1] if summary else '?'}, flagged {bad}", flush=True)
            Path(a.out).write_text(json.dumps(result, indent=1))  # each DSL kept as it finishes
    return 0


if __name__ == "__main__":
    sys.exit(main())
