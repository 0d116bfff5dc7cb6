"""A Triton kernel's TTIR, made by Triton's own front end for one launch's constants (no GPU needed), and
parsed into nested op records the executor walks. Scalar arguments are folded as constants: akg
specialises every program to its sizes, and folded sizes let the executor compute every address."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import select
import struct
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# Triton's pointer types for torch dtypes (its signature strings)
POINTER = {"float32": "*fp32", "float16": "*fp16", "bfloat16": "*bf16", "float64": "*fp64", "int64": "*i64",
           "int32": "*i32", "int16": "*i16", "int8": "*i8", "uint8": "*u8", "bool": "*i1"}


@dataclass
class Op:
    results: list[str]
    name: str
    text: str  # the line from the op name on, without its location
    operands: list[str]
    regions: list[list[Op]] = field(default_factory=list)
    block_args: list[list[str]] = field(default_factory=list)  # each region's ^bb0 arguments

    def attr(self, key: str) -> str | None:
        m = re.search(rf"\b{key} = ([^,}}>]+)", self.text)
        return m.group(1).split(" : ")[0].strip() if m else None

    @property
    def result_type(self) -> str:
        """The type after the last ':' (or after '->' where the op names one)."""
        tail = self.text.rsplit(" : ", 1)[-1]
        return tail.rsplit("->", 1)[-1].strip()


def generate(fn: Any, pointers: dict[str, str], constants: dict[str, Any]) -> str:
    """TTIR text of `fn` (a `triton.jit` function) with `pointers` (argument -> Triton pointer type) and
    every other argument folded as a constant, for sm_90 (the front end's output does not depend on it).
    Under Triton's interpreter (which replaces triton.language's own jit functions when first imported)
    the front end runs in a process of its own, on the kernel's file."""
    if _interpreted():
        code = fn.fn.__code__ if hasattr(fn, "fn") else fn.__code__
        return _FRONT_END.ask({"file": code.co_filename, "kernel": code.co_name, "pointers": pointers,
                               "constants": constants})
    from triton._C.libtriton import ir, passes
    from triton.backends.compiler import GPUTarget
    from triton.compiler.compiler import ASTSource, make_backend

    target = GPUTarget("cuda", 90, 32)
    backend = make_backend(target)
    options = backend.parse_options({})
    ctx = ir.context()
    ir.load_dialects(ctx)
    backend.load_dialects(ctx)
    sig = {a: pointers.get(a, "constexpr") for a in fn.arg_names}
    src = ASTSource(fn=fn, signature=sig, constexprs={k: v for k, v in constants.items() if k not in pointers})
    mod = src.make_ir(target, options, backend.get_codegen_implementation(options), backend.get_module_map(), ctx)
    pm = ir.pass_manager(mod.context)
    passes.common.add_inliner(pm)  # jit helper functions called by the kernel
    passes.common.add_canonicalizer(pm)
    passes.common.add_cse(pm)
    pm.run(mod, "ttir")
    return str(mod)


def _interpreted() -> bool:
    """Whether this process imported Triton under its interpreter (its own jit helpers replaced)."""
    from triton.language import standard
    from triton.runtime.interpreter import InterpretedFunction
    return isinstance(standard.sum, InterpretedFunction) or os.environ.get("TRITON_INTERPRET") == "1"


_LOC = re.compile(r"\s+loc\((?:[^()]|\([^()]*(?:\([^()]*\))*[^()]*\))*\)")
_RESULT = re.compile(r"^((?:%[\w.$-]+(?::\d+)?)(?:, %[\w.$-]+(?::\d+)?)*) = (.*)$")
_VALUE = re.compile(r"%[\w.$-]+(?:#\d+)?")


def _strip(line: str) -> str:
    line = line.strip()
    if " loc(" in line:  # a location's parentheses nest: cut from the last top-level " loc("
        i = line.rfind(" loc(")
        while i > 0 and line[i:].count("(") != line[i:].count(")"):
            i = line.rfind(" loc(", 0, i)
        line = line[:i] if i > 0 else line
    return line.strip()


def _results(spec: str) -> list[str]:
    out = []
    for r in spec.split(", "):
        name, _, n = r.partition(":")
        out += [f"{name}#{i}" for i in range(int(n))] if n else [name]
    return out


def parse(text: str) -> tuple[list[str], list[Op]]:
    """(the kernel's pointer arguments in order, its body)."""
    lines = [_strip(x) for x in text.splitlines()]
    lines = [x for x in lines if x and not x.startswith("#loc")]
    start = next(i for i, x in enumerate(lines) if x.startswith("tt.func"))
    args = re.findall(r"(%[\w.$-]+): !tt\.ptr", lines[start])
    body, end = _block(lines, start + 1)
    return [a[1:] for a in args], body


def _block(lines: list[str], i: int) -> tuple[list[Op], int]:
    ops: list[Op] = []
    while i < len(lines):
        line = lines[i]
        if line.startswith("}") or line.startswith("^bb") and ops:
            return ops, i
        if line.startswith("^bb"):
            i += 1
            continue
        m = _RESULT.match(line)
        results, rest = (_results(m.group(1)), m.group(2)) if m else ([], line)
        name = rest.split(" ", 1)[0].split("(", 1)[0].strip('"')
        op = Op(results, name, rest, [])
        if rest.endswith("{") or rest.endswith("({"):
            head = rest
            i += 1
            while True:  # regions: each `{ ... }`, with its ^bb0 arguments when it has some
                bb: list[str] = []
                if lines[i].startswith("^bb"):
                    bb = re.findall(r"(%[\w.$-]+):", lines[i])
                    i += 1
                region, i = _block(lines, i)
                op.regions.append(region)
                op.block_args.append(bb)
                close = lines[i]
                i += 1
                if close.rstrip().endswith("{"):  # `} else {`
                    continue
                op.text = head + " " + close
                break
        else:
            i += 1
        op.operands = _VALUE.findall(op.text.split(" : ")[0] if op.name != "scf.for" else op.text)
        if op.name == "scf.for":
            op.block_args = [[op.operands[0]] + re.findall(r"(%[\w.$-]+) = %", op.text.split("iter_args", 1)[1])
                             if "iter_args" in op.text else [op.operands[0]]]
        ops.append(op)
    return ops, i


def element(type_text: str) -> str:
    """The element type of a TTIR type: `tensor<32x32xf32>` -> f32, `!tt.ptr<f16>` -> ptr<f16>, i32 -> i32."""
    t = type_text.strip()
    if t.startswith("tensor<"):
        t = t[len("tensor<"):-1].split("x")[-1] if "!tt.ptr" not in t else "ptr"
    if t.startswith("!tt.ptr"):
        return "ptr"
    return t


def shape(type_text: str) -> tuple[int, ...]:
    t = type_text.strip()
    if not t.startswith("tensor<"):
        return ()
    inner = t[len("tensor<"):-1]
    if "!tt.ptr" in inner:
        inner = inner.split("!tt.ptr")[0]
    dims = [d for d in inner.split("x") if d.isdigit()]
    return tuple(int(d) for d in dims)


def constant(text: str, elem: str) -> float | int | bool:
    """An `arith.constant`'s value: `dense<0xFF800000>`, `dense<1.0e+00>`, `100`, `true`."""
    v = text.split("arith.constant", 1)[1].split(" : ")[0].strip()
    if v.startswith("dense<"):
        v = v[len("dense<"):-1]
    if v in ("true", "false"):
        return v == "true"
    if v.startswith("0x"):
        bits = int(v, 16)
        if elem == "f32":
            return struct.unpack("<f", struct.pack("<I", bits))[0]
        if elem == "f64":
            return struct.unpack("<d", struct.pack("<Q", bits))[0]
        if elem == "f16":
            return struct.unpack("<e", struct.pack("<H", bits))[0]
        if elem == "bf16":
            return struct.unpack("<f", struct.pack("<I", bits << 16))[0]
        return bits
    return float(v) if elem.startswith(("f", "bf")) else int(v)


class _FrontEnd:
    """Triton's front end in a process of its own, started once and kept for the caller's later kernels
    (starting it, Triton and torch imported, took ~2.7 s of each kernel's lift): one JSON job a line in,
    one JSON answer a line out. A worker that died or timed out is started again for the next job."""

    TIMEOUT_S = 300.0

    def __init__(self) -> None:
        self.proc: subprocess.Popen[str] | None = None
        self.log: Any = None
        self.lock = threading.Lock()

    def _start(self) -> subprocess.Popen[str]:
        if self.proc is None or self.proc.poll() is not None:
            env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
            self.log = tempfile.TemporaryFile(mode="w+")  # the worker's stderr, read back when it fails
            self.proc = subprocess.Popen([sys.executable, "-m", "ir.port.ttir"], stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=self.log, text=True, env=env,
                                         cwd=str(Path(__file__).resolve().parents[2]))
        return self.proc

    def ask(self, job: dict[str, Any]) -> str:
        with self.lock:
            proc = self._start()
            assert proc.stdin is not None and proc.stdout is not None
            proc.stdin.write(json.dumps(job) + "\n")
            proc.stdin.flush()
            ready, _, _ = select.select([proc.stdout], [], [], self.TIMEOUT_S)
            line = proc.stdout.readline() if ready else ""
            if not line:
                proc.kill()
                proc.wait()
                self.log.seek(0)
                lines = [x for x in self.log.read().strip().splitlines() if x.strip()]
                raise RuntimeError(lines[-1] if lines else "Triton's front end gave no TTIR within "
                                   f"{self.TIMEOUT_S:g} s (exit status {proc.returncode})")
        answer = json.loads(line)
        if "error" in answer:
            raise RuntimeError(answer["error"])
        return answer["ttir"]


_FRONT_END = _FrontEnd()


def _serve() -> None:
    """The front end for a process under Triton's interpreter: a job a line on stdin, its TTIR (or the
    error's last line) a line on stdout."""
    for line in sys.stdin:
        try:
            answer = {"ttir": _ttir(json.loads(line))}
        except Exception as e:  # noqa: BLE001 - the caller raises it, named
            answer = {"error": f"{type(e).__name__}: {e}".strip().splitlines()[-1]}
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()


def _ttir(job: dict[str, Any]) -> str:
    spec = importlib.util.spec_from_file_location("ported_kernels", job["file"])
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    from triton.runtime.jit import JITFunction
    def jitted(v: Any) -> Any:  # the jit function under autotune / heuristics wrappers
        while v is not None and not isinstance(v, JITFunction):
            v = getattr(v, "fn", None)
        return v
    fn = next(j for j in map(jitted, vars(mod).values()) if j is not None and j.fn.__name__ == job["kernel"])
    return generate(fn, job["pointers"], job["constants"])


if __name__ == "__main__":
    _serve()
