"""Kernel IR -> TileLang. Each kernel is a factory `kN(gpu)` returning a T.prim_func over flat 1-D tensors
(2-D views for GEMM operands that T.copy stages):
pointwise: one T.Parallel tile per block; row reductions: a (BM, BR) fragment filled in T.Parallel and
folded with T.reduce_* (chunked with an accumulator when rows are longer than a tile; argmax/argmin as
max then first index); GEMM: operands staged in shared memory tile by tile under T.Pipelined, by T.copy
from a 2-D view when an operand is a plain buffer, element-wise where a prologue is fused into it; T.gemm
on tensor cores for fp16/bf16 on the GPU, exact fp32 FMA otherwise; fused epilogue.
On the CPU the same source builds for TileLang's C target (one thread; blocks run in a loop)."""

from __future__ import annotations

import math
from typing import Any

from ir.kernel.analysis import gemm_dims, split_gemm
from ir.kernel.ir import Buf, Kernel, Load, Reduce, size_args
from ir.kernel.schedule import Schedule

from ..base import UnsupportedKernel
from ..cstyle import View, views
from ..exprs import Printer, comp, fold_grid, py_decode, row_reduction
from .exprs import BF16_HELPERS, TIR, Scope, const, store

MAX_SINGLE_PASS = 8192  # reduction extent held in one fragment; longer rows loop over chunks


def _params(k: Kernel, sched: Schedule) -> str:
    bufs = k.inputs() + k.outs()
    # g_, o_: never a template's or a temporary's name
    names = [f"g_{b.name}" for b in k.inputs()] + ["Out"] + [f"o_{b.name}" for b, _ in k.also]
    shaped = views(k, sched.get("BK", 32))

    def decl(b: Buf) -> str:
        if b.name in shaped:  # a GEMM operand copied tile by tile: 2-D, and float32 on the C target
            dt = f'"{TIR[b.dtype]}" if gpu else "float32"' if b.dtype in ("f16", "bf16") else repr(TIR[b.dtype])
            return f"T.Tensor({shaped[b.name].shape!r}, {dt})"
        return f"T.Tensor(({b.numel},), {'BF16' if b.dtype == 'bf16' else repr(TIR[b.dtype])})"

    return ", ".join(f"{n}: {decl(b)}" for n, b in zip(names, bufs))


def _factory(k: Kernel, sched: Schedule, consts: dict[str, Any], kernel_line: str, body: list[str]) -> str:
    sizes = size_args(k)  # run-time sizes (--dynamic): Python ints bound per size before compiling
    head = [f"def {k.name}(gpu{''.join(', ' + n for n in sizes)}):"] + [f"    {n} = {v}" for n, v in consts.items()]
    # the C target has no fragments: tiles there are thread-local arrays
    head.append("    FRAG = T.alloc_fragment if gpu else T.alloc_local")
    head.append("    PAR = T.Parallel if gpu else T.grid")
    head.append("    SHARED = T.alloc_shared if gpu else T.alloc_local")
    if any(b.dtype == "bf16" for b in k.inputs() + k.outs()) or "LD16(" in "\n".join(body):
        head += ["    " + ln if ln else "" for ln in BF16_HELPERS.splitlines()]
    lines = head + ["", "    @T.prim_func", f"    def main({_params(k, sched)}):", f"        {kernel_line}"]
    lines += ["            " + ln if ln else "" for ln in body]
    return "\n".join(lines + ["", "    return main", ""])


def _nest(lines: list[str], depth: int = 1) -> list[str]:
    return ["    " * depth + ln for ln in lines]


def pointwise(k: Kernel, sched: Schedule) -> str:
    n = k.out.numel
    inner = ["offs = bx * BLOCK + i"]
    env: dict[str, str] = {}
    body: list[str] = []
    py_decode([(v.name, v.extent) for v in k.coords], "offs", body, env)
    p = Printer(Scope(env).render)
    val = p(k.expr)
    body += p.lines + [f"Out[offs] = {store(val, k.out.dtype)}"]
    inner += [f"if offs < {n}:"] + _nest(body)
    lines = ["for i in PAR(BLOCK):"] + _nest(inner)
    return _factory(k, sched, {"BLOCK": sched["BLOCK"], "THREADS": f"{sched.get('threads', 256)} if gpu else 1"},
                    f"with T.Kernel(T.ceildiv({n}, BLOCK), threads=THREADS) as bx:", lines)


FILL = {"sum": 0.0, "dot": 0.0, "max": -math.inf, "min": math.inf, "prod": 1.0}


def reduction(k: Kernel, sched: Schedule) -> str:
    rr = row_reduction(k, sched, MAX_SINGLE_PASS, chunked_ok=("sum", "dot", "max", "min"), nested_ok=True)
    reds, red, rows, br, single = rr.reds, rr.red, rr.rows, rr.br, rr.single
    if any(r.op == "prod" for r in reds) and rr.nested:
        raise UnsupportedKernel("a product inside a nested reduction")
    env: dict[str, str] = {}
    rowb: list[str] = ["row = bx * BM + r"]
    py_decode([(v.name, v.extent) for v in k.coords], "row", rowb, env)
    lines = ['vals = FRAG((BM, BR), "float32")']
    accs: dict[int, str] = {}
    for i, r in enumerate(reds):
        lines.append(f'acc{i} = FRAG((BM,), "float32")')  # arg reductions: an index, exact in fp32 below 2**24
        if r.op in ("argmax", "argmin"):
            lines += [f'nan{i} = FRAG((BM,), "float32")', f'best{i} = FRAG((BM,), "float32")']
        if not single:
            lines.append(f'part{i} = FRAG((BM,), "float32")')
    if not single:
        for i, r in enumerate(reds):
            lines += ["for r in PAR(BM):", f"    acc{i}[r] = {const(FILL[r.op], 'f32')}"]

    def fill(r: Reduce, jexpr: str, target: str, value: str | None = None, ident: float | None = None) -> list[str]:
        """`target`[r, jj] = the reduction's body (or `value` of it) on (row, column); masked lanes get the
        reduction's identity."""
        body: list[str] = list(rowb) + [f"j = {jexpr}"]
        py_decode([(v.name, v.extent) for v in r.axes], "j", body, env)
        p = Printer(Scope(env, dict(accs)).render)
        v = p(r.body)
        if comp(r.body.dtype) != "f32":
            v = f'T.Cast("float32", {v})'
        body += p.lines
        v = value.format(v=v) if value else v
        fold = const(FILL[r.op] if ident is None else ident, "f32")
        body.append(f"{target}[r, jj] = T.if_then_else(T.And(row < {rows}, j < {red}), {v}, {fold})")
        return ["for r, jj in PAR(BM, BR):"] + _nest(body)

    for i, r in enumerate(reds):
        a = f"acc{i}"
        if r.op in ("argmax", "argmin"):
            # torch: the first index of the extreme value; a NaN is the extreme (the first NaN wins)
            big = "max" if r.op == "argmax" else "min"
            lines += fill(r, "jj", "vals", "T.Cast(\"float32\", T.isnan({v}))", 0.0)
            lines.append(f"T.reduce_max(vals, nan{i}, dim=1)")
            worst = -math.inf if big == "max" else math.inf
            lines += fill(r, "jj", "vals", f"T.if_then_else(T.isnan({{v}}), {const(worst, 'f32')}, {{v}})", worst)
            lines.append(f"T.reduce_{big}(vals, best{i}, dim=1)")
            hit = f"T.if_then_else(nan{i}[r] > T.float32(0), T.isnan({{v}}), {{v}} == best{i}[r])"
            first = f"T.if_then_else({hit}, T.Cast(\"float32\", jj), T.float32({float(red)!r}))"
            lines += fill(r, "jj", "vals", first, float(red))
            lines.append(f"T.reduce_min(vals, {a}, dim=1)")
        elif r.op == "prod":  # no product fold in TileLang: each row multiplies serially
            body = list(rowb) + [f"{a}[r] = T.float32(1.0)", f"for j in T.serial({red}):"]
            inner: list[str] = []
            py_decode([(v.name, v.extent) for v in r.axes], "j", inner, env)
            p = Printer(Scope(env, dict(accs)).render)
            v = p(r.body)
            inner += p.lines + [f"{a}[r] = {a}[r] * T.Cast(\"float32\", {v})"]
            body += _nest(inner)
            lines += ["for r in PAR(BM):"] + _nest(body)
        elif single:
            lines += fill(r, "jj", "vals")
            lines.append(f"T.reduce_{ {'dot': 'sum'}.get(r.op, r.op) }(vals, {a}, dim=1)")
        else:
            loop = fill(r, "c * BR + jj", "vals")
            loop.append(f"T.reduce_{ {'dot': 'sum'}.get(r.op, r.op) }(vals, part{i}, dim=1)")
            comb = {"sum": "{a}[r] + {p}[r]", "dot": "{a}[r] + {p}[r]", "max": "T.max({a}[r], {p}[r])",
                    "min": "T.min({a}[r], {p}[r])"}[r.op]
            loop += ["for r in PAR(BM):", f"    {a}[r] = " + comb.format(a=a, p=f"part{i}")]
            lines += [f"for c in T.serial({-(-red // br)}):"] + _nest(loop)
        # an arg reduction's index is held in fp32: integer again where the kernel computes with it
        accs[id(r)] = f'T.Cast("int64", {a}[r])' if r.op in ("argmax", "argmin") else f"{a}[r]"
    body = list(rowb)
    p = Printer(Scope(env, accs).render, prefix="v")
    val = p(k.expr)
    also = [f"o_{b.name}[row] = {store(p(e), b.dtype)}" for b, e in k.also]
    body += p.lines + [f"Out[row] = {store(val, k.out.dtype)}", *also]
    lines += ["for r in PAR(BM):"] + _nest([body[0], f"if row < {rows}:"] + _nest(body[1:]))
    consts = {"BM": sched["BM"], "BR": br, "THREADS": f"{sched.get('threads', 128)} if gpu else 1"}
    return _factory(k, sched, consts, f"with T.Kernel(T.ceildiv({rows}, BM), threads=THREADS) as bx:", lines)


def _copy(name: str, e: Any, v: View, batch: list[tuple[str, int]], env: dict[str, str], own: int, tile: str,
          extent: str) -> list[str]:
    """T.copy of one operand tile from its 2-D view: rows offset by the batch the block works on."""
    strides = [math.prod(c[1] for c in v.batch[i + 1:]) for i in range(len(v.batch))]
    boff = " + ".join(f"{env[c[0]]} * {st}" if st != 1 else env[c[0]] for c, st in zip(v.batch, strides))
    rows_per = v.shape[0] // max(1, math.prod(c[1] for c in v.batch))
    base = f"({boff}) * {rows_per} + " if boff else ""
    start = f"{base}ko * BK, {tile}" if v.k_first else f"{base}{tile}, ko * BK"
    return [f"T.copy(g_{e.buf.name}[{start}], {name}_s)"]


def matmul(k: Kernel, sched: Schedule) -> str:
    g = split_gemm(k)
    if not hasattr(g.dot.body, "op") or g.dot.body.op != "mul":  # type: ignore[attr-defined]
        raise UnsupportedKernel("not a single GEMM")
    M, N, K, B = gemm_dims(k)
    half = g.a.dtype in ("f16", "bf16") and g.b.dtype == g.a.dtype
    env: dict[str, str] = {}
    bat: list[str] = []
    py_decode(g.batch, "bz", bat, env)
    a_env, b_env = dict(env), dict(env)
    a_lines = ["m = by * BM + i", "kk = ko * BK + q"]
    py_decode(g.rows, "m", a_lines, a_env)
    a_env[g.k.name] = "kk"
    pa = Printer(Scope(a_env).render, prefix="a")
    a_val = pa(g.a)
    b_lines = ["n = bx * BN + j", "kk = ko * BK + q"]
    py_decode(g.cols, "n", b_lines, b_env)
    b_env[g.k.name] = "kk"
    pb = Printer(Scope(b_env).render, prefix="b")
    b_val = pb(g.b)
    a_lines += pa.lines + [f"A_s[i, q] = T.if_then_else(T.And(m < {M}, kk < {K}), T.Cast(IN_T, {a_val}), "
                           "T.Cast(IN_T, 0))"]
    b_lines += pb.lines + [f"B_s[q, j] = T.if_then_else(T.And(n < {N}, kk < {K}), T.Cast(IN_T, {b_val}), "
                           "T.Cast(IN_T, 0))"]
    shaped = views(k, sched["BK"])
    va = shaped.get(g.a.buf.name) if isinstance(g.a, Load) else None
    vb = shaped.get(g.b.buf.name) if isinstance(g.b, Load) else None  # views() skips a buffer read twice
    # T.copy stages a plain operand (zero padding past its edges); others are gathered element-wise
    loop = (_copy("A", g.a, va, g.batch, env, M, "by * BM", "BM") if va else
            ["for i, q in PAR(BM, BK):"] + _nest(a_lines))
    loop += (_copy("B", g.b, vb, g.batch, env, N, "bx * BN", "BN") if vb else
             ["for q, j in PAR(BK, BN):"] + _nest(b_lines))
    ta, tb = bool(va and va.k_first), bool(vb and not vb.k_first)
    a_at, b_at = ("A_s[q, i]" if ta else "A_s[i, q]"), ("B_s[j, q]" if tb else "B_s[q, j]")
    flags = "".join([", transpose_A=True" if ta else "", ", transpose_B=True" if tb else ""])
    loop += ["if TENSOR_CORES:", f"    T.gemm(A_s, B_s, C{flags})", "else:",
             "    for q in T.serial(BK):", "        for i, j in PAR(BM, BN):",
             f"            C[i, j] = C[i, j] + T.Cast(\"float32\", {a_at}) * T.Cast(\"float32\", {b_at})"]
    lines = bat + [f"A_s = SHARED({'(BK, BM)' if ta else '(BM, BK)'}, IN_T)",
                   f"B_s = SHARED({'(BN, BK)' if tb else '(BK, BN)'}, IN_T)",
                   'C = FRAG((BM, BN), "float32")', "T.clear(C)",
                   f"for ko in T.Pipelined(T.ceildiv({K}, BK), num_stages=STAGES):"] + _nest(loop)
    ep_env = dict(env)
    ep = ["m = by * BM + i", "n = bx * BN + j"]
    py_decode(g.rows, "m", ep, ep_env)
    py_decode(g.cols, "n", ep, ep_env)
    p = Printer(Scope(ep_env, {id(g.dot): "C[i, j]"}).render, prefix="e")
    val = p(k.expr)
    flat = " + ".join(f"{ep_env[v.name]} * {s}" if s != 1 else ep_env[v.name]
                      for v, s in zip(k.coords, k.out.strides())) or "0"
    ep_body = p.lines + [f"Out[{flat}] = {store(val, k.out.dtype)}"]
    guarded = ep[:2] + [f"if T.And(m < {M}, n < {N}):"] + _nest(ep[2:] + ep_body)
    lines += ["for i, j in PAR(BM, BN):"] + _nest(guarded)
    tc = "gpu" if half else "False"  # fp32 stays exact fp32: tensor cores would round operands to TF32
    in_t = f'"{TIR[g.a.dtype]}" if gpu else "float32"' if half else '"float32"'
    consts = {"BM": sched["BM"], "BN": sched["BN"], "BK": sched["BK"],
              "STAGES": f"{sched.get('num_stages', 2)} if gpu else 1",
              "THREADS": f"{sched.get('threads', 128)} if gpu else 1", "TENSOR_CORES": tc, "IN_T": in_t}
    kl = f"with T.Kernel(T.ceildiv({N}, BN), T.ceildiv({M}, BM), {B}, threads=THREADS) as (bx, by, bz):"
    nt_n, nt_m = -(-N // sched["BN"]), -(-M // sched["BM"])
    if fold_grid(sched, nt_m, B):  # past the grid's y/z limit: one axis, each block decoding its tile
        kl = f"with T.Kernel({nt_n * nt_m * B}, threads=THREADS) as bt:"
        lines = [f"bx = bt % {nt_n}", f"by = bt // {nt_n} % {nt_m}", f"bz = bt // {nt_n * nt_m}"] + lines
    return _factory(k, sched, consts, kl, lines)


