"""A loopback HTTP stand-in for the Anthropic and OpenAI APIs: it serves scripted responses on 127.0.0.1
(never another address) and records what the SDKs sent. Anthropic streaming requests get SSE events."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Response = tuple[int, Any, dict[str, str]]  # status, body (a dict, or a reply text for 200s), headers


def anthropic_body(text: str, input_tokens: int = 11, output_tokens: int = 7) -> dict[str, Any]:
    return {"id": "msg_standin", "type": "message", "role": "assistant", "model": "standin",
            "content": [{"type": "text", "text": text}], "stop_reason": "end_turn", "stop_sequence": None,
            "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens}}


def openai_body(text: str, input_tokens: int = 11, output_tokens: int = 7) -> dict[str, Any]:
    return {"id": "chatcmpl-standin", "object": "chat.completion", "created": 0, "model": "standin",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": input_tokens, "completion_tokens": output_tokens,
                      "total_tokens": input_tokens + output_tokens}}


def _sse(text: str) -> bytes:
    start = anthropic_body("", 11, 1)
    start["content"], start["stop_reason"] = [], None
    events = [("message_start", {"type": "message_start", "message": start}),
              ("content_block_start", {"type": "content_block_start", "index": 0,
                                       "content_block": {"type": "text", "text": ""}})]
    for i in range(0, len(text), 40):
        events.append(("content_block_delta", {"type": "content_block_delta", "index": 0,
                                               "delta": {"type": "text_delta", "text": text[i:i + 40]}}))
    events += [("content_block_stop", {"type": "content_block_stop", "index": 0}),
               ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn",
                                                                     "stop_sequence": None},
                                  "usage": {"output_tokens": 7}}),
               ("message_stop", {"type": "message_stop"})]
    return "".join(f"event: {e}\ndata: {json.dumps(d)}\n\n" for e, d in events).encode()


class StandIn:
    def __init__(self, responses: list[Response]) -> None:
        self.responses = list(responses)
        self.requests: list[dict[str, Any]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
                headers_in = {k.lower(): v for k, v in self.headers.items()}
                outer.requests.append({"path": self.path, "headers": headers_in, "body": body})
                status, payload, headers = outer.responses.pop(0) if outer.responses else (
                    500, {"error": {"type": "api_error", "message": "stand-in has no response left"}}, {})
                if status == 200 and isinstance(payload, str):
                    if "chat/completions" in self.path:
                        payload = openai_body(payload)
                    elif body.get("stream"):
                        data = _sse(payload)
                        self.send_response(200)
                        self.send_header("content-type", "text/event-stream")
                        self.send_header("content-length", str(len(data)))
                        self.end_headers()
                        self.wfile.write(data)
                        return
                    else:
                        payload = anthropic_body(payload)
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for k, v in headers.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> StandIn:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()


def anthropic_error(status: int, kind: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": kind, "message": message}}


def openai_error(message: str, code: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": "invalid_request_error", "code": code}}
