"""The attention template (ir.kernel.flash): each program owns BM query rows of one batch entry and
sweeps the keys in BN tiles, keeping a running row maximum m, sum l and output accumulator; the score
tile is the kernel's own score expression (scale, causal or added masks) over the Q.K^T tile."""

from __future__ import annotations

import math

from hardware_models.spec import HardwareModel
from ir.kernel.analysis import AttnParts, split_attention
from ir.kernel.ir import Kernel
from ir.kernel.schedule import Schedule

from ..base import Ref
from ..exprs import Printer, fold_grid, pow2, py_decode
from .ops import TL, Ctx, signature, store_value


def _dims(a: AttnParts) -> tuple[int, int, int, int, int]:
    """(query rows M, keys N, key width E, value width D, batch B)."""
    return (math.prod(e for _, e in a.rows), a.j.extent, a.e.extent, math.prod(e for _, e in a.cols),
            math.prod(e for _, e in a.batch))


def _in_type(a: AttnParts) -> str:
    ts = {a.q.dtype, a.k.dtype, a.v.dtype}
    return ts.pop() if len(ts) == 1 and ts <= {"f16", "bf16"} else "f32"


def render(k: Kernel, sched: Schedule) -> str:
    a = split_attention(k)
    M, N, E, D, B = _dims(a)
    be, bd = max(16, pow2(E)), max(16, pow2(D))  # tl.dot wants 16 or more along each axis
    prec = sched.get("input_precision", "ieee")
    in_ty = _in_type(a)
    dot = (lambda x, y: f"tl.dot({x}, {y}, input_precision=\"{prec}\")") if in_ty == "f32" else \
        (lambda x, y: f"tl.dot({x}, {y})")
    grid = ([f"pid = tl.program_id(0) % tl.cdiv({M}, BM)", f"bid = tl.program_id(0) // tl.cdiv({M}, BM)"]
            if fold_grid(sched, B) else ["pid = tl.program_id(0)", "bid = tl.program_id(1)"])
    head = [*grid, "mo = pid * BM + tl.arange(0, BM)", f"mmask = (mo < {M})[:, None]",
            f"eo = tl.arange(0, {be})", f"do = tl.arange(0, {bd})"]
    env: dict[str, str] = {}
    py_decode(a.batch, "bid", head, env)
    row_env = dict(env)
    py_decode(a.rows, "mo[:, None]", head, row_env)
    rv, cv, jv, ev = (frozenset(n for n, _ in a.rows), frozenset(n for n, _ in a.cols), frozenset([a.j.name]),
                      frozenset([a.e.name]))
    pq = Printer(Ctx(dict(row_env, **{a.e.name: "eo[None, :]"}), [(rv, "mmask"), (ev, "qemask")]).render, prefix="_qv")
    q_code = pq(a.q)
    head += [f"qemask = (eo < {E})[None, :]", *pq.lines,
             f"_q = tl.broadcast_to(({q_code}).to({TL[in_ty]}), (BM, {be}))",
             '_m = tl.full([BM], float("-inf"), tl.float32)', "_l = tl.zeros([BM], tl.float32)",
             f"_acc = tl.zeros([BM, {bd}], tl.float32)"]
    loop = ["no = n0 + tl.arange(0, BN)", f"nmask = (no < {N})[None, :]", f"knmask = (no < {N})[None, :]",
            f"kemask = (eo < {E})[:, None]", f"vnmask = (no < {N})[:, None]", f"dmask = (do < {D})[None, :]"]
    pk = Printer(Ctx(dict(env, **{a.j.name: "no[None, :]", a.e.name: "eo[:, None]"}),
                     [(jv, "knmask"), (ev, "kemask")]).render, prefix="_kv")
    k_code = pk(a.k)
    loop += pk.lines + [f"_kt = tl.broadcast_to(({k_code}).to({TL[in_ty]}), ({be}, BN))", f"_qk = {dot('_q', '_kt')}"]
    ps = Printer(Ctx(dict(row_env, **{a.j.name: "no[None, :]"}), [(rv, "mmask"), (jv, "nmask")],
                     accs={id(a.qk): "_qk"}).render, prefix="_sv")
    s_code = ps(a.score)
    v_env = dict(env, **{a.j.name: "no[:, None]"})
    py_decode(a.cols, "do[None, :]", loop, v_env)
    pv = Printer(Ctx(v_env, [(jv, "vnmask"), (cv, "dmask")]).render, prefix="_vv")
    v_code = pv(a.v)
    # a row whose scores so far are all -inf (masked) keeps m = -inf: exponents are taken against 0
    # there, so its p and the rescale are 0, not NaN; a row masked everywhere ends 0 / 0, guarded to 0
    # where the kernel's value says so
    loop += ps.lines + [f"_s = tl.where(nmask, tl.broadcast_to(({s_code}).to(tl.float32), (BM, BN)), "
                        'float("-inf"))',
                        "_mn = tl.maximum(_m, tl.max(_s, 1))",
                        '_ms = tl.where(_mn == float("-inf"), 0.0, _mn)',
                        "_p = tl.exp(_s - _ms[:, None])", "_alpha = tl.exp(_m - _ms)",
                        "_l = _l * _alpha + tl.sum(_p, 1)", *pv.lines,
                        f"_v = tl.broadcast_to(({v_code}).to({TL[in_ty]}), (BN, {bd}))",
                        f"_acc = _acc * _alpha[:, None] + {dot(f'_p.to({TL[in_ty]})', '_v')}", "_m = _mn"]
    out_env = dict(row_env)
    tail = ['_o = tl.where((_m == float("-inf"))[:, None], 0.0, _acc / _l[:, None])' if a.guarded
            else "_o = _acc / _l[:, None]"]
    py_decode(a.cols, "do[None, :]", tail, out_env)
    pe = Printer(Ctx(out_env, [(rv, "mmask"), (cv, "dmask")], accs={id(a.out): "_o"}).render, prefix="_ev")
    val = pe(k.expr)
    flat = " + ".join(f"{out_env[v.name]} * {s}" if s != 1 else out_env[v.name]
                      for v, s in zip(k.coords, k.out.strides())) or "0"
    tail += [f"dmask = (do < {D})[None, :]", *pe.lines,
             f"tl.store(out_ptr + ({flat}) + (mo[:, None] * 0 + do[None, :] * 0), "
             f"{store_value(val, k.out.dtype, f'[BM, {bd}]')}, mask=mmask & dmask)"]
    # causal: key tiles past the last row's diagonal hold only -inf scores and are skipped. Compiled, the
    # sweep ends there (BOUNDED); the interpreter cannot take a bound that depends on the program id, so it
    # runs the same body under a guard (which compiled kept the loads out of the software pipeline)
    sweep = [f"for n0 in range(0, {N}, BN):"] + ["    " + ln for ln in loop]
    params = ["BM: tl.constexpr", "BN: tl.constexpr"]
    if a.key_limit is not None:
        head.append(f"hi = (pid + 1) * BM + {a.key_limit}")
        guarded = [f"for n0 in range(0, {N}, BN):", "    if n0 < hi:"] + ["        " + ln for ln in loop]
        sweep = ["if BOUNDED:", f"    for n0 in range(0, tl.minimum(hi, {N}), BN):"] + \
            ["        " + ln for ln in loop] + ["else:"] + ["    " + ln for ln in guarded]
        params.append("BOUNDED: tl.constexpr")
    body = head + sweep + tail
    sig = signature(k, params)
    return sig + "\n" + "\n".join("    " + ln for ln in body) + "\n"


def local_bytes(k: Kernel, s: Schedule) -> int:
    """Shared memory the schedule asks for, as Triton lays it out: the Q tile, num_stages buffers of
    the K and V tiles, and the probabilities tile converted for the second dot."""
    a = split_attention(k)
    _, _, E, D, _ = _dims(a)
    be, bd = max(16, pow2(E)), max(16, pow2(D))
    item = 2 if _in_type(a) in ("f16", "bf16") else 4
    bm, bn, st = s["BM"], s["BN"], max(1, s.get("num_stages", 2))
    return item * (bm * be + st * bn * (be + bd) + bm * bn)


def default_schedule(k: Kernel, target: HardwareModel) -> Schedule:
    M, N, E, D, _ = _dims(split_attention(k))
    wide = max(pow2(E), pow2(D)) > 64  # registers: a 128-wide head halves the key tile
    if _in_type(split_attention(k)) == "f32" or wide:
        s = Schedule(BM=min(128, max(16, pow2(M))), BN=min(32 if wide else 64, max(16, pow2(N))),
                     num_warps=8 if wide else 4, num_stages=2)
    else:  # 16-bit, heads to 64: 64 x 64 tiles over three stages, 1.2-1.5x 128 x 64 over two on the H200
        s = Schedule(BM=min(64, max(16, pow2(M))), BN=min(64, max(16, pow2(N))), num_warps=4, num_stages=3)
    cap = _local_cap(target)
    while local_bytes(k, s) > cap and (s["BM"] > 16 or s["BN"] > 16):  # a wide head: smaller tiles
        s = s.replace(BM=s["BM"] // 2) if s["BM"] >= s["BN"] and s["BM"] > 16 else s.replace(BN=s["BN"] // 2)
    return s.replace(input_precision="tf32x3") if _split(k, target) else s


def space(k: Kernel, target: HardwareModel) -> list[Schedule]:
    cap = _local_cap(target)
    out = [s for s in (Schedule(BM=bm, BN=bn, num_warps=w, num_stages=st) for bm in (16, 32, 64, 128)
                       for bn in (16, 32, 64, 128) for w in (4, 8) for st in (1, 2, 3))
           if local_bytes(k, s) <= cap]
    if _split(k, target):
        out = [s.replace(input_precision="tf32x3") for s in out] + out
    return out


def _local_cap(target: HardwareModel) -> int:
    """Shared memory one program may take: the SM's less the 1 KB CUDA reserves per block."""
    return int(target.chip("local_mem_per_unit_bytes")) - 1024


def _split(k: Kernel, target: HardwareModel) -> bool:
    """fp32 attention on an NVIDIA chip with TF32 tensor cores: 3xTF32 (the verifier checks it)."""
    return _in_type(split_attention(k)) == "f32" and target.vendor == "nvidia" and bool(target.peak("tensor", "tf32"))


def launch(k: Kernel, s: Schedule, ref: Ref) -> list[str]:
    M, _, _, _, B = _dims(split_attention(k))
    tiles = f"triton.cdiv({M}, {s['BM']})"
    grid = f"({tiles} * {B},)" if fold_grid(s, B) else f"({tiles}, {B})"
    args = ", ".join([ref(b) for b in k.inputs()] + [k.out.name])
    bounded = ", BOUNDED=_AKG_COMPILED" if split_attention(k).key_limit is not None else ""
    return [f"{k.name}[{grid}]({args}, BM={s['BM']}, BN={s['BN']}{bounded}, num_warps={s.get('num_warps', 4)}, "
            f"num_stages={s.get('num_stages', 2)})"]
