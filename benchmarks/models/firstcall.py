"""Where a model's first call under `torch.compile(backend=akg)` spends its time, phase by phase, beside
inductor's first call in the same process (both from empty caches unless the caller names its own:
`run.fresh_caches`).

Phases are timed by wrapping akg's own functions (nothing is changed in what they do): the lift and plan
(`build`), the verifier's run (with the worker's `phase_s`: its `candidate` phase is the kernels compiling at
their first launch), loading the written module, its first call (a JIT DSL compiling what the verifier's
build did not leave) and the CUDA-graph capture. What the phases do not cover is dynamo's trace,
AOTAutograd and the fork server's start where the first call waits for it.

    python benchmarks/models/firstcall.py --sizing gpu --dtype bf16 --models gpt2,llama --out runs/fc.json
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[1]))

import zoo  # noqa: E402
from run import fresh_caches  # noqa: E402

import akg_agent  # noqa: E402
from akg_agent import built, cuda_graphs, dynamo  # noqa: E402
from akg_agent import translate as tr  # noqa: E402
from akg_agent.bench.provenance import provenance  # noqa: E402


class Phases:
    """(name, seconds, details) per wrapped call, in the order they ended."""

    def __init__(self) -> None:
        self.log: list[tuple[str, float, dict[str, Any]]] = []

    @contextlib.contextmanager
    def timed(self, name: str, details: dict[str, Any] | None = None) -> Iterator[dict[str, Any]]:
        d = details if details is not None else {}
        t0 = time.perf_counter()
        try:
            yield d
        finally:
            self.log.append((name, round(time.perf_counter() - t0, 3), d))

    def wrap(self, owner: Any, attr: str, name: str, details: Callable[[Any], dict[str, Any]] | None = None
             ) -> None:
        fn = getattr(owner, attr)

        def wrapped(*a: Any, **k: Any) -> Any:
            with self.timed(name) as d:
                out = fn(*a, **k)
                if details is not None:
                    d.update(details(out))
            return out

        setattr(owner, attr, wrapped)

    def totals(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for name, s, _ in self.log:
            out[name] = round(out.get(name, 0.0) + s, 3)
        return out


def _sync(x: Any) -> Any:
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return x


def instrument(p: Phases) -> None:
    p.wrap(tr, "build", "build")
    p.wrap(tr, "_verify", "verify", lambda v: {"worker": v.details.get("phase_s", {})})
    p.wrap(dynamo, "load_written", "load_module")
    first = built.FirstCallBuilt.__call__

    def first_call(self: built.FirstCallBuilt, *args: Any) -> Any:
        if self.called:
            return first(self, *args)
        with p.timed("module_first_call"):
            return _sync(first(self, *args))

    built.FirstCallBuilt.__call__ = first_call  # type: ignore[method-assign]
    p.wrap(cuda_graphs.Replayed, "_capture", "cuda_graph_capture")


def first_call(model: torch.nn.Module, inputs: list[torch.Tensor], make: Callable[[torch.nn.Module], Any]) -> float:
    fn = make(copy.deepcopy(model))
    t0 = time.perf_counter()
    with torch.no_grad():
        _sync(fn(*inputs))
    return round(time.perf_counter() - t0, 3)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizing", choices=sorted(zoo.SIZINGS), default="cpu")
    ap.add_argument("--dtype", choices=sorted(zoo.DTYPES), default="fp32")
    ap.add_argument("--models", default="gpt2")
    ap.add_argument("--out", type=Path, required=True)
    a = ap.parse_args()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    fresh_caches()
    p = Phases()
    instrument(p)
    runs: dict[str, Any] = {}
    for name in a.models.split(","):
        model, inputs = zoo.build(name, a.sizing, a.dtype)
        model, inputs = model.to(device).eval(), [x.to(device) for x in inputs]
        torch._dynamo.reset()
        ind = first_call(model, inputs, torch.compile)
        torch._dynamo.reset()
        p.log.clear()
        akg = first_call(model, inputs, akg_agent.compile)
        runs[f"{name}-{a.dtype}"] = {"inductor_first_call_s": ind, "akg_first_call_s": akg,
                                     "ratio": round(akg / ind, 2), "phases_s": p.totals(),
                                     "unaccounted_s": round(akg - sum(p.totals().values()), 3),
                                     "log": [list(e) for e in p.log]}
        print(name, json.dumps(runs[f"{name}-{a.dtype}"]["phases_s"]), "akg", akg, "inductor", ind, flush=True)
    meta = {"set": "firstcall-phases", "sizing": a.sizing, "dtype": a.dtype, **provenance()}
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps({"meta": meta, "runs": runs}, indent=1))


if __name__ == "__main__":
    main()
