"""A scripted model for tests and demos: answers from a list, in order, and keeps every prompt. Token
counts are a stand-in (characters / 4) so the usage report has something to add up."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field

from ir.errors import AkgError

from .llm import Reply

Script = str | Callable[[str, list[dict[str, str]]], str]


@dataclass
class ScriptedModel:
    replies: list[Script]
    name: str = "scripted:test"
    prompts: list[tuple[str, list[dict[str, str]]]] = field(default_factory=list)

    def complete(self, system: str, messages: list[dict[str, str]]) -> Reply:
        self.prompts.append((system, [dict(m) for m in messages]))
        if not self.replies:
            raise AkgError("the scripted model has no reply left for this request")
        r = self.replies.pop(0)
        text = r(system, messages) if callable(r) else r
        return Reply(text, len(system + json.dumps(messages)) // 4, len(text) // 4, self.name)
