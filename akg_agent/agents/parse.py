"""The reply contract. A coder reply counts when its last fenced `python` block is a complete module
defining `ModelNew`; a designer reply when it holds a fenced `json` plan in the documented schema."""

from __future__ import annotations

import ast
import json
import re
from typing import Any

FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)```", re.S)


class ReplyError(ValueError):
    """A reply that breaks the contract; its message goes back to the model on the one retry."""


def blocks(text: str, lang: str) -> list[str]:
    return [body for tag, body in FENCE.findall(text) if tag.lower() == lang]


def extract_module(text: str) -> str:
    found = blocks(text, "python")
    if not found:
        raise ReplyError("the reply has no fenced ```python block; answer with the whole module in one")
    src = found[-1]
    try:
        tree = ast.parse(src)
    except SyntaxError as e:
        raise ReplyError(f"the last ```python block does not parse: line {e.lineno}: {e.msg}") from None
    names = {n.name for n in tree.body if isinstance(n, ast.ClassDef)}
    names |= {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    if "ModelNew" not in names:
        raise ReplyError("the last ```python block defines no top-level ModelNew; it must be the complete module")
    return src


def extract_json(text: str) -> dict[str, Any]:
    found = blocks(text, "json")
    if not found:
        raise ReplyError("the reply has no fenced ```json block holding the plan")
    try:
        doc = json.loads(found[-1])
    except json.JSONDecodeError as e:
        raise ReplyError(f"the ```json block is not valid JSON: line {e.lineno}: {e.msg}") from None
    if not isinstance(doc, dict):
        raise ReplyError("the ```json block must hold one object (the plan)")
    return doc
