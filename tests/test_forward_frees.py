"""A written forward deletes each intermediate after the step that reads it last, as eager frees them: one
holding every intermediate to its return grew the heap to their sum, the allocator gave it back at the
return, and every call faulted its pages in again (T5 on the CPU: ~7,000 minor faults a call, about a tenth
of its time; inductor's and eager's calls a few dozen; glibc's trimming decides, so the count is measured
in benchmarks, not here)."""

from __future__ import annotations

import re

import torch

from .helpers import import_written, problem_namespace, translated_cpp

MLP = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(256, 2048)
        self.b = nn.Linear(2048, 2048)
        self.c = nn.Linear(2048, 256)

    def forward(self, x):
        h = F.gelu(self.a(x))
        g = torch.sigmoid(self.b(h)) * h
        return self.c(g).softmax(-1), g.sum(-1)


def get_inputs():
    return [torch.randn(256, 256)]


def get_init_inputs():
    return []
'''

_NAME = re.compile(r"\b[A-Za-z_]\w*\b")


def _forward_lines(src: str) -> list[str]:
    body = src[src.index("    def forward"):].splitlines()[1:]
    return [ln.strip() for ln in body if ln.strip() and not ln.strip().startswith("#")]


def test_every_intermediate_is_deleted_after_its_last_read_and_never_read_again(tmp_path, monkeypatch):
    _, _, src = translated_cpp(tmp_path, monkeypatch, MLP, "mlp")
    lines = _forward_lines(src)
    returned = set(_NAME.findall(lines[-1]))
    assigned: dict[str, int] = {}
    deleted: dict[str, int] = {}
    for i, ln in enumerate(lines):
        if ln.startswith("del "):
            for n in ln[4:].split(", "):
                assert n not in deleted, f"{n} deleted twice"
                deleted[n] = i
            continue
        target = re.match(r"(\w+) = ", ln)
        reads = set(_NAME.findall(ln[target.end():] if target else ln))
        gone = reads & set(deleted)
        assert not gone, f"line {i} reads {gone} after deleting it: {ln}"
        if target:
            assigned.setdefault(target.group(1), i)
    params = {n for n in assigned if n.startswith("p_") or n == "x"}
    temps = {n for n in assigned if not n.startswith("_akg")} - params - returned
    assert temps and temps <= set(deleted), f"never deleted: {temps - set(deleted)}"
    ns = problem_namespace(MLP)
    torch.manual_seed(0)
    model, x = ns["Model"](), ns["get_inputs"]()[0]
    new = import_written(tmp_path, src, "mlp_m").ModelNew()
    new.load_state_dict(model.state_dict())
    for got, want in zip(new(x), model(x)):
        torch.testing.assert_close(got, want)
