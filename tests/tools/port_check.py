"""Lift each Triton solution module given and compare the lifted graph, run by akg's IR interpreter, with
the module itself run under Triton's interpreter, on two input seeds. Run in a process of its own with
TRITON_INTERPRET=1: `python -m tests.tools.port_check FILE...`; prints one JSON line per file."""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

import torch

from akg_agent.port import REFERENCE


def check(path: Path) -> dict:
    from ir.errors import AkgError
    from ir.evaluate import run
    from ir.lift import lift
    from ir.problem import load_problem

    with tempfile.TemporaryDirectory() as tmp:
        ref = Path(tmp) / f"{path.stem}_original.py"
        ref.write_text(REFERENCE.format(module=path.name, inputs=path.name, module_path=str(path.resolve()),
                                        problem_path=None))
        p = load_problem(ref)
        try:
            g = lift(p)
        except AkgError as e:
            return {"file": path.name, "lifted": False, "error": str(e)}
        worst = 0.0
        for seed in (0, 1):
            model = p.build_model(seed)
            xs = p.make_inputs(seed)
            want = model(*[x.clone() if isinstance(x, torch.Tensor) else x for x in xs])
            got = list(run(g, xs, g.weights | dict(model.state_dict())))
            want = list(want) if isinstance(want, (list, tuple)) else [want]
            for a, b in zip(got, want, strict=True):
                if tuple(a.shape) != tuple(b.shape):
                    return {"file": path.name, "lifted": True, "error": f"shape {tuple(a.shape)} != {tuple(b.shape)}"}
                worst = max(worst, float((a.double() - b.double()).abs().max()))
        ops = sorted({n.op for n in g.nodes})
        if os.environ.get("AKG_PORT_SHOW"):
            print(g, file=sys.stderr)
        return {"file": path.name, "lifted": True, "max_err": worst, "ops": ops, "nodes": len(g.nodes),
                "ported": g.meta.get("ported", [])}


def main(files: list[str]) -> int:
    assert os.environ.get("TRITON_INTERPRET") == "1", "run with TRITON_INTERPRET=1"
    for f in files:
        print(json.dumps(check(Path(f))), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
