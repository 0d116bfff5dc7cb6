"""The agent loop: designer -> (person) -> coder -> verifier -> conductor, until the conductor stops.
Every step is saved to the run directory as it happens; the best verified module is the answer and an
unverified one never is."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from ir.errors import AkgError

from ..translate import Translation, build, compile_only, render
from ..tuning_db import TuningDB
from ..verifier import Verdict, verify
from .coder import Coder, CoderTask, NoVariantLeft, clean
from .conductor import Conductor, Decision
from .designer import Designer
from .human import Human
from .llm import Model, Recorder, ReplayModel, make_model
from .profile import feedback
from .trace import Attempt, RunState, file_sha


@dataclass
class RunConfig:
    problem: str
    dsl: str
    target: str
    llm: str = "rules"
    budget: int | None = None  # attempts; default 1 with the rules engine alone, 5 with a model
    goal_frac: float = 0.5
    out: str | None = None
    run_dir: str | None = None
    seeds: tuple[int, ...] = (0, 1, 2, 3, 4)
    baselines: tuple[str, ...] = ("eager",)
    timing: bool = True
    train: bool = False
    allow_opaque: bool = False
    use_ncu: bool = True
    conv: str = "library"  # convolutions: torch calls with fused epilogues, or "generated" implicit GEMMs
    pure: bool = False  # every group generated: no library calls (random draws aside)
    dynamic: str | None = None  # input dimensions that vary at run time (`ir.dynamic`)
    library: tuple[str, ...] = ()  # op families left to torch (`ir.passes.library`)


def _new_run_dir(cfg: RunConfig) -> Path:
    if cfg.run_dir:
        return Path(cfg.run_dir)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return Path("runs") / f"{Path(cfg.problem).stem}-{cfg.dsl}-{cfg.target}-{stamp}"


def _open_state(cfg: RunConfig, resume: Path | None) -> RunState:
    if resume is not None:
        st = RunState.load(resume)
        if file_sha(Path(st.config["problem"])) != st.config["problem_sha"]:
            raise AkgError(f"cannot resume {resume}: {st.config['problem']} changed since that run; start a new run")
        return st
    run_dir = _new_run_dir(cfg)
    if (run_dir / "run.json").exists():
        raise AkgError(f"{run_dir} already holds a run: pass --resume {run_dir} to go on with it, or another --run-dir")
    run_dir.mkdir(parents=True, exist_ok=True)
    conf = {"problem": str(Path(cfg.problem).resolve()), "problem_sha": file_sha(Path(cfg.problem)),
            "dsl": cfg.dsl, "target": cfg.target, "train": cfg.train, "allow_opaque": cfg.allow_opaque}
    if cfg.conv != "library":
        conf["conv"] = cfg.conv
    if cfg.pure:
        conf["pure"] = True
    if cfg.dynamic:
        conf["dynamic"] = cfg.dynamic
    if cfg.library:
        conf["library"] = list(cfg.library)
    return RunState(run_dir, conf)


def _task(d: Decision, st: RunState, coder: Coder, outputs: dict[int, str]) -> CoderTask:
    last, best = (st.attempts[-1] if st.attempts else None), st.best()
    read = lambda a: (st.run_dir / a.source_file).read_text()
    if d.action == "write":
        return CoderTask("write", "", coder.rules_source(), "akg's rules-engine module for the plan (not verified)")
    if d.action == "fix" and last is not None:
        out = clean(outputs.get(last.n, ""))[-1500:]
        return CoderTask("fix", last.line() + (f"\noutput:\n{out}" if out.strip() else ""), read(last),
                         "your last module (rejected)")
    if d.action == "optimise" and best is not None:
        text, src = feedback(best, st.plan, Path(st.config["problem"]), st.run_dir / best.source_file,  # type: ignore[arg-type]
                             use_ncu=coder.use_ncu)
        st.event("conductor", "profile", why=f"feedback from {src}")
        return CoderTask("optimise", text, read(best), "the fastest verified module so far")
    tried = "\n".join(a.line() for a in st.attempts[-3:])
    if best is not None:
        return CoderTask("strategy", tried, read(best), "the fastest verified module so far")
    return CoderTask("strategy", tried, coder.rules_source(), "akg's rules-engine module (not yet verified)")


def _verify(cfg: RunConfig, t: Translation, path: Path, by: str) -> Verdict:
    if t.executor == "none":
        return Verdict(False, "not_run", f"nothing can run {t.dsl} for {t.target.name} here")
    if t.executor == "compile-only":  # no device: the rules engine's kernels are compiled, nothing runs
        if by != "rules":
            return Verdict(False, "not_run", f"no {t.target.name} here to run a model-written module on")
        t.compiled = compile_only(t)
        return Verdict(False, "compiled_not_run", t.compiled)
    timed = cfg.timing and t.executor == "native"
    return verify(t.problem, path, target=t.target, seeds=cfg.seeds, timing=timed,
                  baselines=cfg.baselines if timed else (), train=cfg.train)


def _model_header(t: Translation, st: RunState, att: Attempt) -> str:
    assert st.plan is not None
    lines = [f"Generated by akg translate from {t.problem.name}: ModelNew, drop-in for Model.",
             f"target: {t.target.name} ({t.target.description}); dsl: {t.dsl}; executor here: {t.executor}",
             f"written by {att.by} (attempt {att.n}, {att.action}); {st.usage.line()}",
             *st.plan.summary().splitlines(), f"verification: {att.line()}"]
    return "".join(f"# {line}\n" for line in lines)


def run(cfg: RunConfig, model: Model | None = None, human: Human | None = None, resume: Path | None = None,
        db: TuningDB | None = None) -> RunState:
    st = _open_state(cfg, resume)
    conf = st.config
    if model is None:
        model = make_model(cfg.llm)
    if model is not None and not isinstance(model, ReplayModel):
        model = Recorder(model, st.run_dir / "transcript.json")  # replayable with --llm replay:PATH
    budget = cfg.budget or (5 if model is not None else 1)
    # with a model, ops the rules engine cannot lower stay in the graph for the model to write
    t = build(conf["problem"], conf["dsl"], conf["target"], train=conf["train"],
              allow_opaque=conf["allow_opaque"] or model is not None, conv=conf.get("conv", "library"),
              pure=conf.get("pure", False), dynamic=conf.get("dynamic"), library=tuple(conf.get("library", ())))
    coder = Coder(model, t, db, use_ncu=cfg.use_ncu)
    outputs: dict[int, str] = {}
    try:
        if st.plan is None:
            st.plan = Designer(model, cfg.goal_frac).plan(t, st)
            if human is not None:
                reviewed = human.review_plan(st.plan, st.run_dir)
                if reviewed is None:
                    st.event("human", "quit", why="the person declined the plan")
                    raise AkgError(f"stopped at the plan; it is saved in {st.run_dir}")
                if reviewed is not st.plan:
                    st.event("human", "plan", by="human")
                st.plan = reviewed
            st.save()
        else:
            st.event("conductor", "resume", why=f"{len(st.attempts)} attempts already made")
        coder.apply_plan(st.plan)
        coder.variant = sum(1 for a in st.attempts if a.by == "rules" and a.action in ("optimise", "strategy"))
        conductor = Conductor(budget)
        while True:
            d = conductor.decide(st, model is not None)
            st.event("conductor", "decide", action=d.action, why=d.why)
            if d.action == "stop":
                break
            task = _task(d, st, coder, outputs)
            try:
                src, by, notes = coder.write(task, st.plan, st)
            except NoVariantLeft as e:
                st.event("conductor", "decide", action="stop", why=str(e))
                break
            path = st.run_dir / f"attempt_{len(st.attempts) + 1}.py"
            path.write_text(src)
            verdict = _verify(cfg, t, path, by)
            if verdict.accepted and by == "rules":  # the header carries the measured speedup
                src = render(t, verdict.details.get("timing"))
            att = st.add_attempt(d.action, by, src, verdict, notes)
            outputs[att.n] = str(verdict.details.get("output", ""))
            st.event("verifier", "verdict", by=by, action=d.action, code=att.code, accepted=att.accepted)
            if att.accepted and db is not None:
                db.remember_module(t.target.name, t.dsl, t.problem.name, " ".join(g.ops[0] for g in st.plan.groups),
                                   src, att.time_ms, "rules" if by == "rules" else "model")
            if human is not None:
                preview = conductor.decide(st, model is not None).action
                ans, text = human.after_attempt(att, preview)
                if ans == "stop":
                    st.event("human", "stop")
                    break
                if ans == "redirect" and text:
                    st.guidance.append(text)
                    st.event("human", "redirect", why=text[:200])
    except KeyboardInterrupt:
        st.event("conductor", "interrupted")
        raise AkgError(f"interrupted; everything so far is in {st.run_dir}: go on with --resume {st.run_dir}") from None
    except AkgError as e:
        st.event("conductor", "error", why=str(e)[:300])
        raise AkgError(f"{e} (run saved in {st.run_dir}; --resume {st.run_dir} goes on from there)") from None
    return _finish(cfg, t, st)


def _finish(cfg: RunConfig, t: Translation, st: RunState) -> RunState:
    best = st.best()
    compiled = [a for a in st.attempts if a.code == "compiled_not_run"]
    if best is None and compiled:  # the one case where an unverified module is written, and says so
        best = compiled[-1]
        st.result = {"verified": False, "compiled": True, "attempt": best.n, "by": best.by, "time_ms": None,
                     "speedups": {}, "sol_frac": None, "out": cfg.out, "note": best.reason}
        return _write(cfg, st, render(t))
    if best is None:
        last = st.attempts[-1] if st.attempts else None
        st.result = {"verified": False}
        st.save()
        why = last.reason if last else "no attempt was made"
        raise AkgError(f"no verified {t.dsl} module for {t.problem.name} after {len(st.attempts)} attempts "
                       f"(last: {why}); nothing written; the attempts are in {st.run_dir}")
    src = (st.run_dir / best.source_file).read_text()
    if best.by != "rules":
        src = _model_header(t, st, best) + src
    st.result = {"verified": True, "attempt": best.n, "by": best.by, "time_ms": best.time_ms,
                 "speedups": best.speedups(), "sol_frac": best.sol_frac, "out": cfg.out}
    return _write(cfg, st, src)


def _write(cfg: RunConfig, st: RunState, src: str) -> RunState:
    (st.run_dir / "best.py").write_text(src)
    if cfg.out:
        Path(cfg.out).parent.mkdir(parents=True, exist_ok=True)
        Path(cfg.out).write_text(src)
    st.save()
    return st
