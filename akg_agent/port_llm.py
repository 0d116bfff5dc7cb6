"""`akg port --llm MODEL`: where akg cannot lift a module's kernels (raw CUDA-C, inline PTX, an op the
lifter does not know), a model writes the port and the verifier judges each attempt against the original;
a rejected attempt goes back to the model with the verifier's reason, up to the budget."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import prompts
from ir.errors import AkgError

from .agents.llm import Model
from .agents.parse import ReplyError, extract_module
from .verifier import Verdict, verify

GUIDES = Path(prompts.__file__).parent / "guides"


@dataclass
class Rewrite:
    verdict: Verdict
    attempts: list[str] = field(default_factory=list)  # one line per attempt
    by: str = ""
    tokens: tuple[int, int] = (0, 0)


def source_kind(text: str) -> str:
    return ("CUDA-C through load_inline" if "load_inline" in text or "__global__" in text else
            "Pallas" if "pallas" in text else "Triton" if "triton" in text else "its own kernels")


def request(module: Path, dsl: str, target: str, why: str, inputs: str) -> tuple[str, list[dict[str, str]]]:
    """The first request to the model (the same on every machine: a replay transcript matches it)."""
    text = module.read_text()
    guide = GUIDES / f"{dsl}.md"
    system = prompts.render("system.j2", role="coder", dsl=dsl, hardware=target)
    user = prompts.render("port.j2", dsl=dsl, target=target, source_kind=source_kind(text), why=why,
                          inputs=inputs, source=text, guide=guide.read_text()[:6000] if guide.is_file() else "")
    return system, [{"role": "user", "content": user}]


@dataclass(frozen=True)
class Job:
    """What is ported, against what, to which DSL and target, and where the port goes."""
    module: Path
    ref: Path
    dsl: str
    target: str
    out: Path


def rewrite(job: Job, model: Model, why: str, inputs: str, budget: int = 3, timing: bool = True) -> Rewrite:
    module, ref, dsl, target, out = job.module, job.ref, job.dsl, job.target, job.out
    system, messages = request(module, dsl, target, why, inputs)
    done = Rewrite(verdict=None, by=model.name)  # type: ignore[arg-type]
    tin = tout = 0
    for n in range(1, budget + 1):
        reply = model.complete(system, messages)
        tin, tout = tin + reply.input_tokens, tout + reply.output_tokens
        messages.append({"role": "assistant", "content": reply.text})
        try:
            src = extract_module(reply.text)
        except ReplyError as e:
            done.attempts.append(f"attempt {n}: unusable reply ({e})")
            messages.append({"role": "user", "content": prompts.render("retry.j2", error=str(e), kind="module")})
            continue
        cand = out.with_name(f"{out.stem}_attempt{n}.py")
        cand.write_text(src)
        v = verify(ref, cand, target=target, timing=timing)
        done.attempts.append(f"attempt {n}: {v.line()}")
        if v.accepted:
            out.write_text(f"# Written by {model.name} for akg port from {module.name}; verified against it: "
                           f"{v.line()}\n" + src)
            done.verdict, done.tokens = v, (tin, tout)
            return done
        messages.append({"role": "user", "content": f"The verifier rejected it: {v.reason}. Fix that and answer "
                         "with the whole module again."})
    raise AkgError(f"{module.name}: no port by {model.name} was accepted in {budget} attempts; "
                   + "; ".join(done.attempts[-2:]))
