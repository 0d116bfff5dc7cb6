"""Write a replay transcript (`--llm replay:PATH`) whose one answer to `akg port MODULE --dsl D --target T`'s
first request is the module in REPLY: the LLM path run where no model is reachable (the GPU machine).
`python -m tests.tools.port_transcript MODULE DSL TARGET REPLY.py OUT.json`."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from akg_agent.agents.llm import request_key
from akg_agent.port import inputs_text, why_not_lifted
from akg_agent.port_llm import request


def main(module: str, dsl: str, target: str, reply: str, out: str) -> int:
    system, messages = request(Path(module), dsl, target, why_not_lifted(Path(module)), inputs_text(None))
    text = f"The port:\n```python\n{Path(reply).read_text()}```\n"
    doc = {"model": "scripted:port", "calls": [{"key": request_key(system, messages), "system": system,
                                                "messages": messages, "reply": text}]}
    Path(out).write_text(json.dumps(doc, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
