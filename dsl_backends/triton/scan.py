"""Triton scans (cumsum, cumprod): a tile of rows x the scanned axis, tl.cumsum / tl.cumprod along the
axis; an axis longer than one tile is swept in chunks with each row's running total carried over."""

from __future__ import annotations

import math

from ir.kernel.ir import Kernel
from ir.kernel.schedule import Schedule

from ..exprs import FLOATS, Printer, pow2, py_decode, scan_rows
from .ops import Ctx, signature, store_value

MAX_SINGLE_PASS = 4096  # scanned extent held in one tile on the GPU; longer axes loop over chunks


def default_schedule(k: Kernel) -> Schedule:
    sc, rows = scan_rows(k)
    br = min(pow2(sc.axis.extent), MAX_SINGLE_PASS)
    bm = max(1, min(pow2(math.prod(v.extent for v in rows)), 4096 // br))
    return Schedule(BM=bm, BR=br, num_warps=4 if bm * br <= 2048 else 8)


def render_scan(k: Kernel, sched: Schedule) -> str:
    sc, rows = scan_rows(k)
    n, br = sc.axis.extent, sched["BR"]
    nch = -(-n // br)
    head = ["pid = tl.program_id(0)", "rows = pid * BM + tl.arange(0, BM)[:, None]",
            f"rmask = rows < {math.prod(v.extent for v in rows)}"]
    env: dict[str, str] = {}
    py_decode([(v.name, v.extent) for v in rows], "rows", head, env)
    env[sc.axis.name] = env[sc.at.name] = "j"
    # fp32 scans run in fp64: a prefix over tens of thousands of signed values cancels, and a tree
    # order in fp32 missed the float64 reference by 2.6e-4 on the H100 (memory-bound: fp64 is free)
    acc_t = {"f32": "tl.float64", "f64": "tl.float64"}.get(sc.dtype, "tl.float32" if sc.dtype in FLOATS else "tl.int64")
    ident = ("0" if sc.op == "sum" else "1") + (".0" if sc.dtype in FLOATS else "")
    fn = "tl.cumsum" if sc.op == "sum" else "tl.cumprod"
    masks = [(frozenset(v.name for v in rows), "rmask"), (frozenset({sc.axis.name, sc.at.name}), "jmask")]
    p = Printer(Ctx(env, masks).render, prefix="u")
    body = p(sc.body)
    lines = list(p.lines)
    lines.append(f"tile = tl.where(rmask & jmask, ({body}).to({acc_t}), {ident})")
    lines.append(f"acc = {fn}(tile, axis=1, reverse={sc.reverse})")
    if nch > 1:
        lines[-1] += " + carry" if sc.op == "sum" else " * carry"
        total = "tl.sum(tile, axis=1, keep_dims=True)" if sc.op == "sum" else \
            "tl.reduce(tile, 1, _akg_mul, keep_dims=True)"
        upd = f"carry = carry + {total}" if sc.op == "sum" else f"carry = carry * {total}"
    p2 = Printer(Ctx(env, masks, {id(sc): "acc"}).render, prefix="v")
    val = p2(k.expr)
    flat = " + ".join(f"{env[v.name]} * {st}" if st != 1 else env[v.name] for v, st in zip(k.coords, k.out.strides()))
    lines += p2.lines + [f"tl.store(out_ptr + ({flat}), {store_value(val, k.out.dtype, '[BM, BR]')}, "
                         "mask=rmask & jmask)"]
    if nch == 1:
        body_lines = ["j = tl.arange(0, BR)[None, :]", f"jmask = j < {n}"] + lines
    else:  # chunks in scan order (last first when reversed), each row's total so far carried
        start = f"({nch - 1} - ci) * BR" if sc.reverse else "ci * BR"
        inner = [f"j = {start} + tl.arange(0, BR)[None, :]", f"jmask = j < {n}"] + lines + [upd]
        body_lines = [f"carry = tl.full([BM, 1], {ident}, {acc_t})", f"for ci in range({nch}):"] + \
            ["    " + ln for ln in inner]
    src = signature(k, ["BM: tl.constexpr", "BR: tl.constexpr"]) + "\n"
    return src + "\n".join("    " + ln for ln in head + body_lines) + "\n"
