"""The model set against eager, inductor (default and max-autotune) and akg (`torch.compile(backend=akg)`), one
run per model and dtype, all contenders timed in the same turns with an A/A control (akg's timing protocol:
warm-up, cache flush, CUDA events or perf_counter, median, balanced turn orders).

Per model: each contender's first call (compile included; contenders run one after another in this process,
so a later one may profit from what an earlier one left: `firstcall_fresh.py` times first calls from cold
processes) and steady median, its speedup over eager and
over inductor, its largest error against a float64 evaluation of the model beside eager's own, whether it
is correct by the verifier's rule (against float64, with eager's own error as the floor), and what akg left
to torch (dynamo graphs, fallbacks, ops kept). JSON and an HTML table, with the run's provenance.

    python benchmarks/models/run.py --sizing cpu --dtype fp32 --out runs/models-cpu-fp32
    python benchmarks/models/run.py --sizing tiny --models gpt2,convnet --modes eager,akg --trials 3 --out /tmp/m
"""

from __future__ import annotations

import argparse
import copy
import html
import json
import math
import os
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

import torch

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[1]))

import zoo  # noqa: E402

import akg_agent  # noqa: E402
from akg_agent.bench.provenance import provenance  # noqa: E402
from akg_agent.verifier.policy import TolerancePolicy, compare  # noqa: E402
from akg_agent.verifier.timing import AA_BASELINE, default_trials, time_interleaved  # noqa: E402

# akg replays inference graphs as CUDA graphs on a GPU; inductor does with mode="reduce-overhead": both
# ways are measured, with and without, so a gain is never only the launches' host cost
# akg-first-eager: first_call="eager", calls run as torch while the module is written in the background; its
# first call is timed, then its ready time (until the first call that runs the written module returns)
MODES = ("eager", "inductor", "inductor-max-autotune", "inductor-reduce-overhead", "akg", "akg-no-cuda-graphs",
         "akg-first-eager")


def contender(mode: str, model: torch.nn.Module, dsl: str = "") -> Any:
    if mode == "eager":
        return model
    if mode == "inductor":
        return torch.compile(copy.deepcopy(model))
    if mode == "inductor-max-autotune":
        return torch.compile(copy.deepcopy(model), mode="max-autotune")
    if mode == "inductor-reduce-overhead":
        return torch.compile(copy.deepcopy(model), mode="reduce-overhead")
    if mode == "akg":
        return akg_agent.compile(copy.deepcopy(model), dsl=dsl)
    if mode == "akg-no-cuda-graphs":
        return akg_agent.compile(copy.deepcopy(model), dsl=dsl, cuda_graphs="off")
    if mode == "akg-first-eager":
        return akg_agent.compile(copy.deepcopy(model), dsl=dsl, first_call="eager")
    raise ValueError(f"unknown mode {mode!r}: choose from {', '.join(MODES)}")


def _err(y: torch.Tensor, y64: torch.Tensor | None) -> float | None:
    return None if y64 is None else float((y.double() - y64).abs().max())


def run_model(name: str, sizing: str, dtype: str, modes: list[str], device: torch.device, trials: int,
              dsl: str = "") -> dict:
    model, xs = zoo.build(name, sizing, dtype)
    model, xs = model.to(device), [x.to(device) for x in xs]
    rec: dict[str, Any] = {"model": name, "sizing": sizing, "dtype": dtype, "contenders": {}}
    with torch.no_grad():
        want = model(*xs)
        try:
            want64 = copy.deepcopy(model).double()(*[x.double() if x.is_floating_point() else x for x in xs])
        except Exception:  # noqa: BLE001 - a model that cannot run in float64 is compared with eager only
            want64 = None
        fns: dict[str, Any] = {}
        for mode in modes:
            torch._dynamo.reset()
            c: dict[str, Any] = rec["contenders"].setdefault(mode, {})
            try:
                fn = contender(mode, model, dsl)
                t0 = time.perf_counter()
                got = fn(*xs)
                if device.type == "cuda":
                    torch.cuda.synchronize()
                c["first_call_s"] = time.perf_counter() - t0
                while mode == "akg-first-eager":  # the output judged is the written modules'
                    started = len(fn.akg_report.pending)
                    fn.akg_report.wait()
                    got = fn(*xs)
                    if device.type == "cuda":
                        torch.cuda.synchronize()
                    c["ready_s"] = time.perf_counter() - t0
                    if len(fn.akg_report.pending) == started:  # that call started no module (a new size's)
                        break
            except Exception as e:  # noqa: BLE001 - a contender that fails is reported, the run goes on
                c["error"] = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:300]
                c["traceback"] = traceback.format_exc()[-2000:]
                continue
            res = compare(got.detach(), want.detach(), TolerancePolicy(), want64)
            c.update(correct=bool(res.ok), max_err_vs_fp64=_err(got, want64), reason=res.reason if not res.ok else "")
            if mode.startswith("akg"):
                rep = fn.akg_report
                c["akg"] = {"graphs": [g.line() for g in rep.graphs], "notes": [n for g in rep.graphs for n in g.notes],
                            "fallbacks": list(rep.fallbacks),
                            "kept_in_torch": sorted({op for g in rep.graphs for op in g.kept_in_torch})}
            fns[mode] = fn
        rec["eager_max_err_vs_fp64"] = _err(want, want64)
        if "eager" in fns:
            fns[AA_BASELINE] = copy.deepcopy(model)
        got_t = time_interleaved(fns, [xs], device, trials)
    base = got_t.get("eager")
    for mode, t in got_t.items():
        c = rec["contenders"].setdefault(mode, {})
        if isinstance(t, Exception):
            c["error"] = f"timing raised {type(t).__name__}: {t}"[:300]
            continue
        c["median_s"] = t.median_s
        if base is not None and not isinstance(base, Exception):
            c["speedup_vs_eager"] = base.median_s / t.median_s
    ind = rec["contenders"].get("inductor", {}).get("median_s")
    for c in rec["contenders"].values():
        if ind and c.get("median_s"):
            c["speedup_vs_inductor"] = ind / c["median_s"]
    return rec


def fresh_caches() -> None:
    """Empty compile caches for inductor and akg unless the caller named its own, so each first call compiles
    (a warm machine keeps inductor's cache from an earlier run, which made its first call look 5x faster)."""
    for var, prefix in (("TORCHINDUCTOR_CACHE_DIR", "inductor-run-"), ("AKG_CACHE_DIR", "akg-run-")):
        if var not in os.environ:
            os.environ[var] = tempfile.mkdtemp(prefix=prefix)


def _geomean(xs: list[float]) -> float | None:
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def summarize(records: list[dict], modes: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for mode in modes:
        cs = [r["contenders"].get(mode, {}) for r in records]
        ok = [c for c in cs if c.get("correct")]
        ind_first = [(c.get("first_call_s"), r["contenders"].get("inductor", {}).get("first_call_s"))
                     for r, c in zip(records, cs)]
        ind_ready = [(c.get("ready_s"), b) for c, (_, b) in zip(cs, ind_first)]
        out[mode] = {"correct": len(ok), "models": len(records),
                     "geomean_vs_eager": _geomean([c["speedup_vs_eager"] for c in ok if "speedup_vs_eager" in c]),
                     "geomean_vs_inductor": _geomean([c["speedup_vs_inductor"] for c in ok
                                                      if "speedup_vs_inductor" in c]),
                     "min_vs_inductor": min((c["speedup_vs_inductor"] for c in ok if "speedup_vs_inductor" in c),
                                            default=None),
                     "first_call_vs_inductor": _geomean([a / b for a, b in ind_first if a and b]),
                     **({"ready_vs_inductor_first_call": _geomean([a / b for a, b in ind_ready if a and b])}
                        if any(a for a, _ in ind_ready) else {})}
    return out


def write_html(doc: dict, path: Path) -> None:
    modes = doc["meta"]["modes"]
    head = "".join(f"<th>{html.escape(m)}</th>" for m in modes)
    rows = []
    for r in doc["records"]:
        cells = []
        for m in modes:
            c = r["contenders"].get(m, {})
            if "error" in c:
                cells.append(f"<td title='{html.escape(c['error'])}'>error</td>")
                continue
            ok = "" if c.get("correct", True) else " (wrong)"
            cells.append(f"<td>{(c.get('median_s') or 0) * 1e3:.3f} ms, {c.get('speedup_vs_inductor', 0):.2f}x ind, "
                         f"first {c.get('first_call_s', 0):.1f} s"
                         + (f", ready {c['ready_s']:.1f} s" if "ready_s" in c else "") + f"{ok}</td>")
        kept = ", ".join(r["contenders"].get("akg", {}).get("akg", {}).get("kept_in_torch", []))
        rows.append(f"<tr><td>{html.escape(r['model'])}</td>{''.join(cells)}<td>{html.escape(kept)}</td></tr>")
    summ = "".join(f"<li>{html.escape(m)}: {json.dumps(s)}</li>" for m, s in doc["summary"].items())
    path.write_text(f"<html><body><h1>Model set: {doc['meta']['sizing']}, {doc['meta']['dtype']}</h1>"
                    f"<p>{html.escape(json.dumps(doc['meta']))}</p><ul>{summ}</ul><table border=1>"
                    f"<tr><th>model</th>{head}<th>akg left in torch</th></tr>{''.join(rows)}</table></body></html>")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizing", choices=sorted(zoo.SIZINGS), default="cpu")
    p.add_argument("--dtype", choices=sorted(zoo.DTYPES), default="fp32")
    p.add_argument("--models", default=",".join(zoo.SPECS), help="comma-separated, from the set")
    p.add_argument("--modes", default=",".join(MODES), help=f"comma-separated, from {', '.join(MODES)}")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--trials", type=int, default=None)
    p.add_argument("--dsl", default="", help="akg's DSL (default: the target's own, Triton on a GPU)")
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args(argv)
    modes, device = args.modes.split(","), torch.device(args.device)
    torch._dynamo.config.allow_rnn = True  # recurrent modules reach the backends (dynamo skips them otherwise)
    trials = args.trials or default_trials(device.type == "cuda")
    args.out.mkdir(parents=True, exist_ok=True)
    fresh_caches()
    records = []
    for name in args.models.split(","):
        if name not in zoo.SPECS:
            raise SystemExit(f"unknown model {name!r}: choose from {', '.join(zoo.SPECS)}")
        records.append(run_model(name, args.sizing, args.dtype, modes, device, trials, args.dsl))
        (args.out / "results.partial.json").write_text(json.dumps(records, indent=2, default=str))
        c = records[-1]["contenders"]
        print(name, "  ".join(f"{m}: {v.get('median_s', float('nan')) * 1e3:.2f} ms"
                              + ("" if v.get("correct", True) else " WRONG") for m, v in c.items()), flush=True)
    doc = {"meta": {"set": "models", "sizing": args.sizing, "dtype": args.dtype, "modes": modes, "dsl": args.dsl,
                    "device": str(device), "trials": trials, "date": time.strftime("%Y-%m-%d %H:%M:%S"),
                    **provenance(argv and ["benchmarks/models/run.py", *argv])},
           "summary": summarize(records, modes), "records": records}
    (args.out / "results.json").write_text(json.dumps(doc, indent=2, default=str))
    (args.out / "results.partial.json").unlink(missing_ok=True)
    write_html(doc, args.out / "results.html")
    print(json.dumps(doc["summary"], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
