"""Every problem of a folder written in Triton for a GPU target and its kernels compiled for sm_90 on this
CPU (`triton_sm90`): the GPU-only compile failures, found without a GPU.

    python -m tests.tools.triton_sm90_sweep tests/problems [--target h100]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from akg_agent.translate import translate
from ir.errors import AkgError

ROOT = Path(__file__).resolve().parents[2]


def kernels_of(t) -> dict:  # noqa: ANN001 - a Translation
    out = {}
    for k in t.program.kernels():
        ptrs = {b.name: b.dtype for b in k.inputs()}
        ptrs.update({"out_ptr": k.out.dtype}, **{b.name: b.dtype for b, _ in getattr(k, "also", ())})
        out[k.name] = {"pointers": ptrs, "constexprs": dict(t.schedules[k.name])}
    return out


def check(problem: Path, target: str, tmp: Path) -> str:
    try:
        t = translate(problem, "triton", target, verify_result=False, timing=False)
    except AkgError as e:
        return f"not written: {str(e).splitlines()[0][:150]}"
    (tmp / "m.py").write_text(t.source)
    (tmp / "k.json").write_text(json.dumps(kernels_of(t)))
    r = subprocess.run([sys.executable, "-m", "tests.tools.triton_sm90", str(tmp / "m.py"), str(tmp / "k.json")],
                       cwd=ROOT, capture_output=True, text=True, timeout=900)
    return "ok" if r.returncode == 0 else (r.stdout.strip() or r.stderr.strip().splitlines()[-1])[:300]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("folder", type=Path)
    p.add_argument("--target", default="h100")
    args = p.parse_args(argv)
    bad = 0
    with tempfile.TemporaryDirectory() as d:
        for problem in sorted(args.folder.glob("*.py")):
            verdict = check(problem, args.target, Path(d))
            bad += verdict != "ok"
            print(f"{problem.name}: {verdict}", flush=True)
    print(f"{bad} of {len(list(args.folder.glob('*.py')))} not compiled")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
