"""The one place that talks to models: a request, the reply parsed by the caller's contract, retried
once with the parse error; usage and events recorded in the run's state."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import prompts

from .llm import Model, price_for
from .parse import ReplyError
from .trace import RunState


def ask(model: Model, system: str, user: str, kind: str, state: RunState, agent: str,
        parse: Callable[[str], Any]) -> Any | None:
    """One request; a reply that breaks the contract is retried once with the parse error; None after
    that (the caller lets the rules engine do the step and the trace says so)."""
    messages = [{"role": "user", "content": user}]
    for _ in range(2):
        reply = model.complete(system, messages)
        state.usage.add(reply, price_for(model.name.partition(":")[2]))
        state.event(agent, "model_call", by=model.name, input_tokens=reply.input_tokens,
                    output_tokens=reply.output_tokens, retries=reply.retries)
        try:
            return parse(reply.text)
        except ReplyError as e:
            state.event(agent, "malformed_reply", by=model.name, why=str(e))
            messages = messages + [{"role": "assistant", "content": reply.text},
                                   {"role": "user", "content": prompts.render("retry.j2", error=str(e), kind=kind)}]
    return None
