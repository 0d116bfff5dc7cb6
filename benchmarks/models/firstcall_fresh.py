"""First calls from a cold start: each model and contender (akg, inductor) in its own new process with empty
compile caches, so neither pays for nor profits from what the other left in the process (imports, compile
workers, caches). Prints one JSON line per run.

    python benchmarks/models/firstcall_fresh.py --models gpt2,t5 --sizing cpu
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).parent


def _one(name: str, mode: str, sizing: str, dtype: str) -> None:
    import torch

    sys.path.insert(0, str(HERE))
    sys.path.insert(0, str(HERE.parents[1]))
    import zoo

    import akg_agent

    model, xs = zoo.build(name, sizing, dtype)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model, xs = model.to(device), [x.to(device) for x in xs]
    t0 = time.perf_counter()
    fn = akg_agent.compile(model) if mode == "akg" else torch.compile(model)
    with torch.no_grad():
        fn(*xs)
    if device == "cuda":
        torch.cuda.synchronize()
    print(json.dumps({"model": name, "mode": mode, "sizing": sizing, "dtype": dtype,
                      "first_call_s": round(time.perf_counter() - t0, 3)}), flush=True)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default="gpt2")
    p.add_argument("--sizing", default="cpu")
    p.add_argument("--dtype", default="fp32")
    p.add_argument("--one", nargs=2, metavar=("MODEL", "MODE"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.one:
        _one(*args.one, args.sizing, args.dtype)
        return 0
    for name in args.models.split(","):
        for mode in ("inductor", "akg"):
            env = dict(os.environ, AKG_CACHE_DIR=tempfile.mkdtemp(prefix="akg-fc-"),
                       TORCHINDUCTOR_CACHE_DIR=tempfile.mkdtemp(prefix="inductor-fc-"))
            subprocess.run([sys.executable, __file__, "--one", name, mode, "--sizing", args.sizing,
                            "--dtype", args.dtype], env=env, check=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
