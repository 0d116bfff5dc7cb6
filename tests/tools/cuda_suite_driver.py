"""Runs written ModelNew modules once each on the GPU: `build DIR` compiles them all (threads, nvcc in
parallel), `run DIR` calls forward once per module. The memcheck test runs `run` under compute-sanitizer."""

from __future__ import annotations

import importlib.util
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch

from ir.problem import load_problem


def load(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main(mode: str, folder: str, problems: str) -> int:
    mods = sorted(Path(folder).glob("*.py"))
    if mode == "build":
        with ThreadPoolExecutor(8) as ex:
            list(ex.map(lambda p: load(p)._akg_lib(), mods))
        return 0
    bad = 0
    for path in mods:
        prob = load_problem(Path(problems) / path.name)
        ref = prob.build_model(0)
        m = load(path).ModelNew(*prob.get_init_inputs())
        m.load_state_dict(ref.state_dict())
        m = m.cuda().eval()
        xs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in prob.make_inputs(0)]
        try:
            with torch.no_grad():
                m(*xs)
            torch.cuda.synchronize()
            print(f"ran {path.stem}", flush=True)
        except Exception as e:  # noqa: BLE001 - report every module, then fail
            bad += 1
            print(f"FAILED {path.stem}: {e}", flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
