"""`akg redteam PROBLEM --dsl D`: attack the verifier on one problem: the corpus replayed with its mutations
(offline, no model), then `--rounds` rounds of a model playing the attacker (`--llm`). Exit 0 where every
attack was rejected, 1 where one was accepted (saved as a failing test in the run folder)."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from akg_agent.agents.llm import make_model
from akg_agent.redteam.campaign import Campaign
from akg_agent.redteam.corpus import load
from akg_agent.translate import translate
from akg_agent.verifier import device_for
from akg_agent.verifier.sandbox import Limits
from ir.errors import AkgError
from ir.problem import load_problem


def cmd_redteam(args: argparse.Namespace) -> int:
    problem = Path(args.problem)
    if not problem.is_file():
        raise AkgError(f"no such problem file: {problem}")
    if args.honest:
        honest = Path(args.honest).read_text()
    elif not args.dsl:
        raise AkgError("akg redteam needs --dsl (to translate an honest module to attack) or --honest FILE")
    else:  # the rules engine's own translation: what a user would get
        honest = translate(problem, args.dsl, args.target, verify_result=False, timing=False).source
    out = Path(args.out or f"runs/redteam-{problem.stem}-{time.strftime('%Y%m%d-%H%M%S')}")
    out.mkdir(parents=True, exist_ok=True)
    camp = Campaign(problem, honest, args.target, out, Limits(timeout_s=args.timeout))
    first = load_problem(problem).make_inputs(0)[0]
    batch = first.shape[0] if hasattr(first, "shape") and first.dim() else None
    on_gpu = device_for(args.target) == "cuda"
    attacks = [a for a in load() if (a.gpu and on_gpu) or (a.cpu and not on_gpu) or not (a.gpu or a.cpu)]
    if not args.no_corpus:
        camp.replay(attacks, batch)
    model = make_model(args.llm) if args.llm else None
    if model is not None:
        camp.play(model, args.rounds, args.dsl or "the honest module's DSL")
    doc = camp.report()
    for o in camp.outcomes:
        mark = "BREACH" if o.accepted else ("held" if o.as_expected in (True, None) else "held (other reason)")
        print(f"{mark:<20} {o.name:<28} {o.code}: {o.reason[:110]}")
    print(f"{doc['held']} of {doc['attacks']} attacks rejected; report {out / 'report.json'}"
          + (f"; failing tests for {', '.join(doc['breaches'])}" if doc["breaches"] else ""))
    return 1 if doc["breaches"] else 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("redteam", help="attack the verifier on a problem: the exploit corpus, then a model")
    p.add_argument("problem", help="KernelBench-format problem")
    p.add_argument("--dsl", help="the honest module's DSL (and the model's); not needed with --honest")
    p.add_argument("--target", default="cpu")
    p.add_argument("--honest", help="an honest module to attack instead of the rules engine's translation")
    p.add_argument("--llm", help="a model as attacker: anthropic:MODEL, openai:MODEL or replay:PATH")
    p.add_argument("--rounds", type=int, default=4, help="the model's attacks")
    p.add_argument("--no-corpus", action="store_true", help="the model only")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds per verification")
    p.add_argument("-o", "--out", help="run folder (default runs/redteam-PROBLEM-TIME)")
    p.set_defaults(fn=cmd_redteam)
