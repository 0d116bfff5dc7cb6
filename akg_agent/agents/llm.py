"""Language models behind `--llm`: the SDK clients (Anthropic, OpenAI-compatible), a replay of a recorded
transcript, and the recorder that writes one. `rules` means no model at all (the offline default).

Our own retry loop (the SDKs' is switched off) so that backoff is visible in the trace and testable:
rate limits, overload and server errors are retried with exponential backoff (honouring Retry-After);
a rejected key or an unknown model is one clear line, never a traceback. Keys are read from the
environment, passed to the SDK and nowhere else: never logged, never written to a trace.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ir.errors import AkgError

PRICES = Path(__file__).with_name("prices.toml")


@dataclass
class Reply:
    text: str
    input_tokens: int = 0
    output_tokens: int = 0
    model: str = ""
    retries: int = 0


class Model(Protocol):
    """What an agent asks of a model: one completion for a system prompt and a message list."""

    name: str

    def complete(self, system: str, messages: list[dict[str, str]]) -> Reply: ...


@dataclass
class Usage:
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    retries: int = 0
    cost_usd: float | None = 0.0

    def add(self, r: Reply, price: tuple[float, float] | None) -> None:
        self.calls += 1
        self.input_tokens += r.input_tokens
        self.output_tokens += r.output_tokens
        self.retries += r.retries
        if price is None:
            self.cost_usd = None  # unknown price: say so rather than guess
        elif self.cost_usd is not None:
            self.cost_usd += (r.input_tokens * price[0] + r.output_tokens * price[1]) / 1e6

    def line(self) -> str:
        cost = "cost unknown (no price for this model)" if self.cost_usd is None else f"${self.cost_usd:.4f}"
        return (f"{self.calls} model calls, {self.input_tokens} input + {self.output_tokens} output tokens, {cost}"
                + (f", {self.retries} retries" if self.retries else ""))


def price_for(model: str) -> tuple[float, float] | None:
    """USD per million (input, output) tokens, by the longest matching model-name prefix."""
    table = tomllib.loads(PRICES.read_text())["models"]
    best = max((p for p in table if model.startswith(p)), key=len, default=None)
    return None if best is None else (float(table[best]["input"]), float(table[best]["output"]))


MEASURED = re.compile(r"\d+(?:\.\d+)?(?:e[+-]?\d+)?(?=\s*(?:ms|us|x\b|%))|\d+\.\d+(?:e[+-]?\d+)?")


def request_key(system: str, messages: list[dict[str, str]]) -> str:
    """What makes two requests the same for a replay. Measured times, speedups and percentages differ from
    run to run (numbers with a decimal point, or followed by ms, us, x or %), so they are masked; all else
    must match."""
    doc = json.dumps({"system": system, "messages": messages}, sort_keys=True)
    return hashlib.sha256(MEASURED.sub("#", doc).encode()).hexdigest()[:32]


@dataclass
class Retry:
    retries: int = 4
    backoff_s: float = 2.0
    max_wait_s: float = 60.0
    sleep: Callable[[float], None] = time.sleep


# Classify SDK exceptions by HTTP status and class name: both SDKs share the shape (status_code, response).
RETRYABLE_STATUS = {408, 409, 429, 500, 502, 503, 504, 529}


def _status(e: Exception) -> int | None:
    return getattr(e, "status_code", None)


def _retry_after(e: Exception) -> float | None:
    resp = getattr(e, "response", None)
    try:
        return float(resp.headers.get("retry-after")) if resp is not None else None
    except (TypeError, ValueError):
        return None


def _call_with_retry(provider: str, env_key: str, model: str, fn: Callable[[], Reply], retry: Retry) -> Reply:
    last = ""
    for attempt in range(retry.retries + 1):
        try:
            reply = fn()
            reply.retries = attempt
            return reply
        except Exception as e:  # noqa: BLE001 - SDK errors are mapped to one line below
            status, kind = _status(e), type(e).__name__
            if status in (401, 403) or kind in ("AuthenticationError", "PermissionDeniedError"):
                raise AkgError(f"{provider} rejected the API key (HTTP {status}): set {env_key} to a valid key "
                               "for this endpoint") from None
            if status == 404 or kind == "NotFoundError":
                raise AkgError(f"{provider} has no model {model!r} at this endpoint (HTTP 404): check "
                               f"--llm {provider}:MODEL") from None
            connection = kind in ("APIConnectionError", "APITimeoutError")
            if not connection and status not in RETRYABLE_STATUS:
                msg = str(e).splitlines()[0][:300] if str(e) else kind
                raise AkgError(f"{provider} refused the request (HTTP {status}): {msg}") from None
            last = f"HTTP {status}" if status else kind
            if attempt < retry.retries:
                wait = _retry_after(e) or retry.backoff_s * 2**attempt
                retry.sleep(min(wait, retry.max_wait_s))
    raise AkgError(f"{provider} still failing after {retry.retries} retries ({last}); everything finished so far "
                   "is kept in the run directory: run again with --resume")


def _sdk(name: str) -> Any:
    import importlib

    try:
        return importlib.import_module(name)
    except ImportError:
        raise AkgError(f"--llm {name} needs the {name} SDK: pip install 'akg[llm]' (make setup installs it)") from None


def _need_key(env_key: str, provider: str) -> str:
    key = os.environ.get(env_key, "")
    if not key:
        raise AkgError(f"--llm {provider} needs an API key: set {env_key} (or use --llm rules, which needs none)")
    return key


class AnthropicModel:
    """The `anthropic` SDK; key from ANTHROPIC_API_KEY, endpoint from ANTHROPIC_BASE_URL. Long outputs stream:
    the SDK refuses a non-streamed request whose max_tokens could outlast its HTTP timeout."""

    STREAM_ABOVE = 16_000

    def __init__(self, model: str, max_tokens: int = 32_000, retry: Retry | None = None) -> None:
        anthropic = _sdk("anthropic")
        self.name = f"anthropic:{model}"
        self.model, self.max_tokens, self.retry = model, max_tokens, retry or Retry()
        self.client = anthropic.Anthropic(api_key=_need_key("ANTHROPIC_API_KEY", "anthropic"),
                                          base_url=os.environ.get("ANTHROPIC_BASE_URL") or None, max_retries=0)

    def _once(self, system: str, messages: list[dict[str, str]]) -> Reply:
        kw: dict[str, Any] = dict(model=self.model, max_tokens=self.max_tokens, system=system, messages=messages)
        if self.max_tokens > self.STREAM_ABOVE:
            with self.client.messages.stream(**kw) as stream:
                msg = stream.get_final_message()
        else:
            msg = self.client.messages.create(**kw)
        text = "".join(getattr(b, "text", "") for b in msg.content)
        return Reply(text, msg.usage.input_tokens, msg.usage.output_tokens, self.name)

    def complete(self, system: str, messages: list[dict[str, str]]) -> Reply:
        return _call_with_retry("anthropic", "ANTHROPIC_API_KEY", self.model,
                                lambda: self._once(system, messages), self.retry)


class OpenAIModel:
    """The `openai` SDK against any OpenAI-compatible server (vLLM, ollama, ...): OPENAI_API_KEY,
    OPENAI_BASE_URL. A local server that wants no key still gets a placeholder, as the SDK needs one."""

    def __init__(self, model: str, max_tokens: int = 32_000, retry: Retry | None = None) -> None:
        openai = _sdk("openai")
        self.name = f"openai:{model}"
        self.model, self.max_tokens, self.retry = model, max_tokens, retry or Retry()
        base = os.environ.get("OPENAI_BASE_URL") or None
        key = os.environ.get("OPENAI_API_KEY") or ("local" if base else _need_key("OPENAI_API_KEY", "openai"))
        self.client = openai.OpenAI(api_key=key, base_url=base, max_retries=0)

    def _once(self, system: str, messages: list[dict[str, str]]) -> Reply:
        resp = self.client.chat.completions.create(
            model=self.model, max_completion_tokens=self.max_tokens,
            messages=[{"role": "system", "content": system}, *messages])
        text = resp.choices[0].message.content or ""
        u = resp.usage
        return Reply(text, u.prompt_tokens if u else 0, u.completion_tokens if u else 0, self.name)

    def complete(self, system: str, messages: list[dict[str, str]]) -> Reply:
        return _call_with_retry("openai", "OPENAI_API_KEY", self.model,
                                lambda: self._once(system, messages), self.retry)


@dataclass
class ReplayModel:
    """Answers from a recorded transcript (see Recorder); a request it does not hold is an error."""

    path: Path
    name: str = "replay"
    entries: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        try:
            doc = json.loads(Path(self.path).read_text())
        except (OSError, json.JSONDecodeError) as e:
            raise AkgError(f"cannot read the replay transcript {self.path}: {e}") from None
        self.name = doc.get("model", "replay")  # it stands in for the recorded model, prompts included
        for ent in doc.get("calls", []):
            self.entries.setdefault(ent["key"], []).append(ent)

    def complete(self, system: str, messages: list[dict[str, str]]) -> Reply:
        key = request_key(system, messages)
        queue = self.entries.get(key)
        if not queue:
            raise AkgError(f"the replay transcript {self.path} holds no answer for request {key} (the prompt "
                           "differs from the recorded run): record it again with a live model")
        ent = queue.pop(0)
        return Reply(ent["reply"], ent.get("input_tokens", 0), ent.get("output_tokens", 0), self.name)


class Recorder:
    """Wraps a model; every call is appended to a transcript file that `--llm replay:PATH` can replay."""

    def __init__(self, model: Model, path: Path) -> None:
        self.inner, self.path, self.name = model, Path(path), model.name
        self.doc: dict[str, Any] = {"model": model.name, "calls": []}
        if self.path.is_file():
            self.doc = json.loads(self.path.read_text())

    def complete(self, system: str, messages: list[dict[str, str]]) -> Reply:
        r = self.inner.complete(system, messages)
        self.doc["calls"].append({"key": request_key(system, messages), "system": system, "messages": messages,
                                  "reply": r.text, "input_tokens": r.input_tokens, "output_tokens": r.output_tokens})
        self.path.write_text(json.dumps(self.doc, indent=1))
        return r


def make_model(spec: str, retry: Retry | None = None) -> Model | None:
    """`rules` -> None (no model); `anthropic:MODEL`, `openai:MODEL`, `replay:PATH`."""
    if spec == "rules":
        return None
    provider, _, arg = spec.partition(":")
    if not arg:
        raise AkgError(f"--llm {spec!r}: write rules, anthropic:MODEL, openai:MODEL or replay:PATH")
    if provider == "anthropic":
        return AnthropicModel(arg, retry=retry)
    if provider == "openai":
        return OpenAIModel(arg, retry=retry)
    if provider == "replay":
        return ReplayModel(Path(arg))
    raise AkgError(f"--llm {spec!r}: unknown provider {provider!r}; choose rules, anthropic, openai or replay")
