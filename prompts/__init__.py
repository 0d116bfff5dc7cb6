"""Prompt templates (Jinja, StrictUndefined: a missing variable is an error, never an empty string),
the per-DSL guides they quote, and BM25 retrieval over guide sections and past verified kernels."""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2

ROOT = Path(__file__).parent
_ENV = jinja2.Environment(loader=jinja2.FileSystemLoader(str(ROOT)), undefined=jinja2.StrictUndefined,
                          keep_trailing_newline=True, trim_blocks=True, lstrip_blocks=True, autoescape=False)


def render(name: str, **ctx: Any) -> str:
    return _ENV.get_template(name).render(**ctx)


@dataclass(frozen=True)
class Section:
    source: str  # "guide:triton#Reductions" or "kernel:<problem>"
    title: str
    text: str


def guide_sections(dsl: str) -> list[Section]:
    """A guide is markdown; each `## ` heading starts a section that retrieval can pick on its own."""
    path = ROOT / "guides" / f"{dsl}.md"
    if not path.is_file():
        return []
    parts = re.split(r"(?m)^## ", path.read_text())
    out = []
    for p in parts[1:]:
        title, _, body = p.partition("\n")
        out.append(Section(f"guide:{dsl}#{title.strip()}", title.strip(), "## " + p.strip()))
    return out


def guide_intro(dsl: str) -> str:
    path = ROOT / "guides" / f"{dsl}.md"
    return re.split(r"(?m)^## ", path.read_text())[0].strip() if path.is_file() else ""


TOKEN = re.compile(r"[a-z][a-z0-9]+")


def tokens(text: str) -> list[str]:
    return [t for w in TOKEN.findall(text.lower()) for t in [w] + w.split("_") if len(t) > 1]


def bm25(query: str, docs: list[Section], k: int, k1: float = 1.5, b: float = 0.75) -> list[Section]:
    """Okapi BM25 over tokenised sections; ties keep document order so prompts are deterministic."""
    if not docs or k <= 0:
        return []
    toks = [tokens(d.title + " " + d.text) for d in docs]
    avg = sum(map(len, toks)) / len(toks)
    df = Counter(t for ts in toks for t in set(ts))
    q = set(tokens(query))
    scores = []
    for i, ts in enumerate(toks):
        tf = Counter(ts)
        s = sum(math.log(1 + (len(docs) - df[t] + 0.5) / (df[t] + 0.5)) * tf[t] * (k1 + 1)
                / (tf[t] + k1 * (1 - b + b * len(ts) / avg)) for t in q if t in tf)
        scores.append((-s, i))
    return [docs[i] for s, i in sorted(scores)[:k] if s < 0]
