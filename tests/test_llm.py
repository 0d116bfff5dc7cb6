"""Model clients against a loopback stand-in (no test calls a paid API), the reply contract, prompts."""

from __future__ import annotations

import jinja2
import pytest

import prompts
from akg_agent.agents.llm import AnthropicModel, OpenAIModel, Recorder, ReplayModel, Retry, Usage, make_model
from akg_agent.agents.parse import ReplyError, extract_json, extract_module
from akg_agent.agents.scripted import ScriptedModel
from ir.errors import AkgError
from tests.standin import StandIn, anthropic_error, openai_error

KEY = "sk-test-secret-0123456789"
MSG = [{"role": "user", "content": "hello"}]


@pytest.fixture
def sleeps():
    return []


def retry(sleeps):
    return Retry(retries=3, backoff_s=0.5, sleep=sleeps.append)


@pytest.fixture
def env(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    for v in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY"):
        monkeypatch.delenv(v, raising=False)
    return monkeypatch


def test_anthropic_reply_tokens_and_request(env, sleeps):
    with StandIn([(200, "the answer", {})]) as s:
        env.setenv("ANTHROPIC_BASE_URL", s.url)
        r = AnthropicModel("claude-test", max_tokens=4000, retry=retry(sleeps)).complete("sys", MSG)
    assert (r.text, r.input_tokens, r.output_tokens, r.retries) == ("the answer", 11, 7, 0)
    req = s.requests[0]
    h = req["headers"]  # the key travels as x-api-key or as a bearer token, depending on the SDK version
    assert req["path"] == "/v1/messages" and KEY in (h.get("x-api-key"), h.get("authorization", "")[7:])
    assert req["body"]["system"] == "sys" and req["body"]["messages"] == MSG and not req["body"].get("stream")


def test_anthropic_streams_long_outputs(env, sleeps):
    text = "streamed " * 30
    with StandIn([(200, text, {})]) as s:
        env.setenv("ANTHROPIC_BASE_URL", s.url)
        r = AnthropicModel("claude-test", max_tokens=64000, retry=retry(sleeps)).complete("sys", MSG)
    assert s.requests[0]["body"]["stream"] is True
    assert r.text == text and r.output_tokens == 7


def test_rate_limit_and_server_errors_are_retried_with_backoff(env, sleeps):
    script = [(429, anthropic_error(429, "rate_limit_error", "slow down"), {"retry-after": "3"}),
              (529, anthropic_error(529, "overloaded_error", "overloaded"), {}),
              (500, anthropic_error(500, "api_error", "boom"), {}), (200, "ok", {})]
    with StandIn(script) as s:
        env.setenv("ANTHROPIC_BASE_URL", s.url)
        r = AnthropicModel("claude-test", max_tokens=100, retry=retry(sleeps)).complete("sys", MSG)
    assert r.text == "ok" and r.retries == 3
    assert sleeps == [3.0, 1.0, 2.0]  # Retry-After first, then exponential backoff


def test_retries_run_out_with_a_resume_hint(env, sleeps):
    with StandIn([(503, anthropic_error(503, "api_error", "down"), {})] * 4) as s:
        env.setenv("ANTHROPIC_BASE_URL", s.url)
        with pytest.raises(AkgError, match="still failing after 3 retries.*--resume"):
            AnthropicModel("claude-test", max_tokens=100, retry=retry(sleeps)).complete("sys", MSG)


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_bad_key_is_one_line_without_the_key(env, sleeps, provider):
    body = anthropic_error(401, "authentication_error", f"invalid x-api-key {KEY}") if provider == "anthropic" \
        else openai_error(f"Incorrect API key provided: {KEY}", "invalid_api_key")
    with StandIn([(401, body, {})]) as s:
        if provider == "anthropic":
            env.setenv("ANTHROPIC_BASE_URL", s.url)
            model = AnthropicModel("claude-test", max_tokens=100, retry=retry(sleeps))
        else:
            env.setenv("OPENAI_BASE_URL", s.url + "/v1")
            model = OpenAIModel("gpt-4.1", retry=retry(sleeps))
        with pytest.raises(AkgError) as e:
            model.complete("sys", MSG)
    msg = str(e.value)
    assert "rejected the API key" in msg and f"{provider.upper()}_API_KEY" in msg
    assert KEY not in msg and "\n" not in msg and sleeps == []


def test_unknown_model_and_missing_key(env, sleeps):
    with StandIn([(404, openai_error("The model does not exist", "model_not_found"), {})]) as s:
        env.setenv("OPENAI_BASE_URL", s.url + "/v1")
        with pytest.raises(AkgError, match="no model 'nope'"):
            OpenAIModel("nope", retry=retry(sleeps)).complete("sys", MSG)
    env.delenv("ANTHROPIC_API_KEY")
    with pytest.raises(AkgError, match="set ANTHROPIC_API_KEY"):
        make_model("anthropic:claude-sonnet-4-5")
    with pytest.raises(AkgError, match="unknown provider"):
        make_model("bard:x")
    assert make_model("rules") is None


def test_openai_compatible_server(env, sleeps):
    with StandIn([(429, openai_error("rate limited", "rate_limit"), {}), (200, "from a local server", {})]) as s:
        env.setenv("OPENAI_BASE_URL", s.url + "/v1")
        env.delenv("OPENAI_API_KEY")  # a local server needs no key
        r = OpenAIModel("qwen-coder", retry=retry(sleeps)).complete("sys", MSG)
    assert r.text == "from a local server" and r.retries == 1 and sleeps == [0.5]
    body = s.requests[-1]["body"]
    assert s.requests[-1]["path"] == "/v1/chat/completions"
    assert body["messages"][0] == {"role": "system", "content": "sys"} and body["messages"][1:] == MSG


def test_recorded_transcript_replays_and_refuses_other_requests(tmp_path):
    rec = Recorder(ScriptedModel(["one", "two"]), tmp_path / "t.json")
    rec.complete("s", MSG)
    rec.complete("s", [{"role": "user", "content": "again"}])
    rep = ReplayModel(tmp_path / "t.json")
    assert rep.complete("s", [{"role": "user", "content": "again"}]).text == "two"
    assert rep.complete("s", MSG).text == "one"
    with pytest.raises(AkgError, match="holds no answer"):
        rep.complete("s", MSG)  # each recorded answer is used once


def test_usage_and_prices():
    u = Usage()
    from akg_agent.agents.llm import Reply, price_for

    assert price_for("claude-opus-4-5-20251101") == (5.0, 25.0)  # the longest prefix wins
    assert price_for("claude-opus-4-1") == (15.0, 75.0)
    u.add(Reply("x", 1_000_000, 100_000), price_for("claude-sonnet-4-5"))
    assert u.cost_usd == pytest.approx(4.5) and "$4.5000" in u.line()
    u.add(Reply("x", 10, 10), price_for("some-local-model"))
    assert u.cost_usd is None and "cost unknown" in u.line() and u.calls == 2


def test_module_contract():
    good = "text\n```python\nimport torch\nclass ModelNew(torch.nn.Module):\n    pass\n```\n"
    assert "class ModelNew" in extract_module("```python\nx = 1\n```\n" + good)  # the last block counts
    with pytest.raises(ReplyError, match="no fenced"):
        extract_module("class ModelNew: pass")
    with pytest.raises(ReplyError, match="does not parse: line 1"):
        extract_module("```python\ndef (:\n```")
    with pytest.raises(ReplyError, match="no top-level ModelNew"):
        extract_module("```python\nclass Model: pass\n```")
    assert extract_json('plan:\n```json\n{"groups": []}\n```') == {"groups": []}
    with pytest.raises(ReplyError, match="not valid JSON"):
        extract_json("```json\n{groups: 1}\n```")


def test_templates_are_strict_and_retrieval_picks_the_right_section():
    with pytest.raises(jinja2.UndefinedError):
        prompts.render("retry.j2", kind="plan")  # `error` missing: an error, never an empty string
    assert "one fenced ```json block" in prompts.render("retry.j2", kind="plan", error="x")
    secs = prompts.guide_sections("triton")
    assert len(secs) >= 5 and all(s.text.startswith("## ") for s in secs)
    assert prompts.bm25("reduce softmax sum rows", secs, k=1)[0].title == "Reductions"
    assert prompts.bm25("matmul linear gemm tile", secs, k=1)[0].title == "Matrix multiplication"
    for dsl in ("triton", "cpp", "cuda-c", "tilelang", "pallas", "metal"):
        assert prompts.guide_intro(dsl) and prompts.guide_sections(dsl), dsl


def test_nsight_compute_csv_is_summarised():
    from pathlib import Path

    from akg_agent.agents.profile import parse_ncu_csv, summarize_ncu

    text = (Path(__file__).parent / "fixtures" / "ncu_h100_gemm_sigmoid_sum.csv").read_text()  # recorded on the H100
    ks = parse_ncu_csv(text)
    assert [k["kernel"] for k in ks] == ["k0_sigmoid", "k1_mul"]
    assert ks[0]["duration_us"] == pytest.approx(15.392) and ks[0]["registers"] == 144
    assert ks[0]["stalls"]["short_scoreboard"] == pytest.approx(10.58)
    s = summarize_ncu(ks)
    assert s.index("k0_sigmoid") < s.index("k1_mul") and "top stalls (cycles per issue): short_scoreboard" in s
    assert parse_ncu_csv("==PROF== no kernels were profiled") == []
