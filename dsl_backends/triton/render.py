"""Kernel IR -> Triton source: pointwise, row-reduction, row-fused and GEMM (grouped tile order)
templates; scans live in scan.py, the op table and scope in ops.py."""

from __future__ import annotations

import math

from ir.kernel import siblings
from ir.kernel.analysis import online_pairs, split_gemm
from ir.kernel.divmod import digits_of, flat_loads
from ir.kernel.ir import Kernel, Load, Reduce, Var, free_vars, walk
from ir.kernel.schedule import Schedule

from ..exprs import Printer, bind_row_axes, fold_grid, pow2, py_decode, row_coords, row_reduction, strided_reduction
from . import tma
from .ops import FOLD, MAX_SINGLE_PASS, TL, Ctx, signature, store_value


def transposing(k: Kernel) -> tuple[Var, Var] | None:
    """(y, x) where a pointwise kernel reads some operand contiguously along coordinate y while it
    writes contiguously along x, its innermost: a transpose fused into the kernel (RoPE writing keys
    [B, H, D, S] for the score GEMM). A flat block reads such an operand with a stride, one element
    per 32-byte sector; a [y, x] tile lets Triton load along y and store along x."""
    coords = {v.name: v for v in k.coords}
    if len(coords) < 2 or any(type(v.extent) is not int for v in k.coords) or k.coords[-1].extent < 16:
        return None
    x = k.coords[-1]
    along: dict[str, int] = {}
    for e in walk(k.expr):
        if isinstance(e, Load) and e.index and e.buf.numel > 1:
            inner = free_vars(e.index[-1])
            if len(inner) == 1 and (y := next(iter(inner))) in coords and y != x.name:
                along[y] = along.get(y, 0) + e.buf.numel
    y = max(along, key=lambda n: along[n], default=None)  # a broadcast (a bias along channels) is no transpose
    big = y is not None and along[y] * 2 >= k.out.numel and coords[y].extent >= 16
    return (coords[y], x) if big and y is not None else None


def pointwise(k: Kernel, sched: Schedule) -> str:
    n = k.out.numel
    env: dict[str, str] = {}
    tile = "[BLOCK]"
    if "YBLOCK" in sched and (yx := transposing(k)) is not None:
        y, x = yx
        rest = [(v.name, v.extent) for v in k.coords if v not in yx]
        lines = ["pid = tl.program_id(0)", f"tx = pid % tl.cdiv({x.extent}, XBLOCK)",
                 f"ty = (pid // tl.cdiv({x.extent}, XBLOCK)) % tl.cdiv({y.extent}, YBLOCK)",
                 f"r = pid // (tl.cdiv({x.extent}, XBLOCK) * tl.cdiv({y.extent}, YBLOCK))",
                 f"{y.name} = ty * YBLOCK + tl.arange(0, YBLOCK)[:, None]",
                 f"{x.name} = tx * XBLOCK + tl.arange(0, XBLOCK)[None, :]",
                 f"dmask = ({y.name} < {y.extent}) & ({x.name} < {x.extent})"]
        env.update({y.name: y.name, x.name: x.name})
        py_decode(rest, "r", lines, env)
        lines.append("offs = " + " + ".join(f"{v.name} * {st}" if st != 1 else v.name
                                           for v, st in zip(k.coords, k.out.strides())))
        tile = "[YBLOCK, XBLOCK]"
    else:
        lines = ["pid = tl.program_id(0)", "offs = pid * BLOCK + tl.arange(0, BLOCK)", f"dmask = offs < {n}"]
        py_decode([(v.name, v.extent) for v in k.coords], "offs", lines, env)
    ctx = Ctx(env, [(frozenset(v.name for v in k.coords), "dmask")])
    p = Printer(ctx.render)
    val = p(k.expr)
    also = [p(e) for _, e in k.also]  # merged kernels' outputs (ir.kernel.merge), at the same offsets
    lines += p.lines
    lines.append(f"tl.store(out_ptr + offs, {store_value(val, k.out.dtype, tile)}, mask=dmask)")
    lines += [f"tl.store({b.name} + offs, {store_value(v, b.dtype, tile)}, mask=dmask)"
              for (b, _), v in zip(k.also, also)]
    consts = ["YBLOCK: tl.constexpr", "XBLOCK: tl.constexpr"] if tile != "[BLOCK]" else ["BLOCK: tl.constexpr"]
    return signature(k, consts) + "\n" + "\n".join("    " + ln for ln in lines) + "\n"


def reduction(k: Kernel, sched: Schedule) -> str:
    rr = row_reduction(k, sched, MAX_SINGLE_PASS, nested_ok=True)
    reds, red, rows, single = rr.reds, rr.red, rr.rows, rr.single
    head = ["pid = tl.program_id(0)", "rows = pid * BM + tl.arange(0, BM)[:, None]", f"rmask = rows < {rows}"]
    env: dict[str, str] = {}
    py_decode([(v.name, v.extent) for v in k.coords], "rows", head, env)
    red_vars = frozenset(v.name for r in reds for v in r.axes)
    row_vars = frozenset(v.name for v in k.coords)

    def bind_red(lines: list[str], jexpr: str) -> None:
        lines.append(f"j = {jexpr}")
        lines.append(f"jmask = j < {red}")
        for r in reds:
            py_decode([(v.name, v.extent) for v in r.axes], "j", lines, env)

    body: list[str] = []
    if single:
        bind_red(body, "tl.arange(0, BR)[None, :]")
        ctx = Ctx(env, [(row_vars, "rmask"), (red_vars, "jmask")])
        p = Printer(ctx.render)
        val = p(k.expr)
        also = [p(e) for _, e in k.also]
        body += p.lines
    else:
        accs: dict[int, str] = {}
        init = {"sum": "0.0", "dot": "0.0", "max": 'float("-inf")', "min": 'float("inf")', "prod": "1.0"}
        comb = {"sum": "{a} + {p}", "dot": "{a} + {p}", "max": "tl.maximum({a}, {p})",
                "min": "tl.minimum({a}, {p})", "prod": "{a} * {p}"}
        # independent reductions share one sweep (the row read once); nested ones (a variance around
        # its mean) sweep once per level, inner first, so an outer one reads the inner's total
        sweeps = [reds] if not rr.nested else [[r] for r in reds]
        # a reduction along a strided axis (a column sum) keeps a [BM, BR] accumulator and folds it across
        # once after the sweep: folding every step put a cross-warp reduction in each iteration (a bf16
        # sum over dim 0 of [1024]^3 on the H200: 744 us against 542, torch's 515)
        tiled = not rr.nested and strided_reduction(k) and all(r.op in FOLD for r in reds)
        for n_sweep, sweep in enumerate(sweeps):
            for r in sweep:
                i = reds.index(r)
                body.append(f"acc{i} = tl.full([BM, {'BR' if tiled else 1}], {init[r.op]}, tl.float32)")
            body.append(f"for start in range(0, {red}, BR):")
            inner: list[str] = []
            bind_red(inner, "start + tl.arange(0, BR)[None, :]")
            ctx = Ctx(env, [(row_vars, "rmask"), (red_vars, "jmask")], dict(accs))
            p = Printer(ctx.render, prefix=f"u{n_sweep}_" if rr.nested else "u")
            for r in sweep:
                i = reds.index(r)
                part = ctx.lanes(r, p) if tiled else p(r)
                p.lines.append(f"acc{i} = " + comb[r.op].format(a=f"acc{i}", p=part))
            inner += p.lines
            body += ["    " + ln for ln in inner]
            if tiled:
                body += [f"acc{i} = {FOLD[r.op]}(acc{i}, axis=1, keep_dims=True)" for r in sweep
                         for i in [reds.index(r)]]
            accs.update({id(r): f"acc{reds.index(r)}" for r in sweep})
        ctx2 = Ctx(env, [(row_vars, "rmask")], accs)
        p2 = Printer(ctx2.render, prefix="v")
        val = p2(k.expr)
        also = [p2(e) for _, e in k.also]
        body += p2.lines
    body.append(f"tl.store(out_ptr + rows, {store_value(val, k.out.dtype, '[BM, 1]')}, mask=rmask)")
    body += [f"tl.store({b.name} + rows, {store_value(v, b.dtype, '[BM, 1]')}, mask=rmask)"
             for (b, _), v in zip(k.also, also)]
    src = signature(k, ["BM: tl.constexpr", "BR: tl.constexpr"]) + "\n"
    return src + "\n".join("    " + ln for ln in head + body) + "\n"


def row_stores(k: Kernel, env: dict[str, str], values: list[str]) -> list[str]:
    """A row kernel's sibling outputs (`k.also`, one value per row, [BM, 1]) stored at each row's place."""
    rows = siblings.row_vars(k)
    out = []
    for (b, _), v in zip(k.also, values):
        at = " + ".join(f"{env[c.name]} * {st}" for c, st in zip(k.coords, b.strides()) if c in rows) or "rows * 0"
        out.append(f"tl.store({b.name} + ({at}), {store_value(v, b.dtype, '[BM, 1]')}, mask=rmask)")
    return out


def rownorm(k: Kernel, sched: Schedule) -> str:
    """A row-fused kernel (softmax, norms): each program owns BM rows; every reduction depends on the
    rows alone. When a row fits one tile, the row is loaded once and every reduction and the output
    reuse it (one read, one write); otherwise each reduction sweeps the row in BR chunks, inner ones
    first, and a last sweep writes the output."""
    row_c, cols = row_coords(k)
    n, rows = math.prod(e for _, e in cols), math.prod(v.extent for v in row_c)
    reds = list(dict.fromkeys(k.reductions()))
    br = sched["BR"]
    single = all(pow2(math.prod(v.extent for v in r.axes)) <= br for r in reds) and pow2(n) <= br
    head = ["pid = tl.program_id(0)", "rows = pid * BM + tl.arange(0, BM)[:, None]", f"rmask = rows < {rows}"]
    env: dict[str, str] = {}
    py_decode([(v.name, v.extent) for v in row_c], "rows", head, env)
    row_vars = frozenset(v.name for v in row_c)
    out_shape = "[BM, BR]" if cols else "[BM, 1]"

    def store(lines: list[str], val: str, hint: str = "") -> None:
        # a 0-d output (a loss reduced to one value) is still stored through a [BM, 1] block of pointers
        flat = " + ".join(f"{env[v.name]} * {st}" if st != 1 else env[v.name]
                          for v, st in zip(k.coords, k.out.strides())) or "rows * 0"
        mask = "rmask & cmask" if cols else "rmask"
        lines.append(f"tl.store(out_ptr + ({flat}), {store_value(val, k.out.dtype, out_shape)}, mask={mask}{hint})")

    body: list[str] = []
    if single:
        masks: list[tuple[frozenset[str], str]] = [(row_vars, "rmask")]
        body.append("j = tl.arange(0, BR)[None, :]")
        if cols:
            body.append(f"cmask = j < {n}")
            py_decode(cols, "j", body, env)
            masks.append((frozenset(c for c, _ in cols), "cmask"))
        for r in reds:
            bind_row_axes(r.axes, cols, env, body, "j", masks)
        p = Printer(Ctx(env, masks, own_masks=True).render, dedupe=True)
        val = p(k.expr)
        also = [p(e) for _, e in k.also]
        body += p.lines
        store(body, val)
        body += row_stores(k, env, also)
    else:
        accs: dict[int, str] = {}
        init = {"sum": "0.0", "max": 'float("-inf")', "min": 'float("inf")', "prod": "1.0"}
        comb = {"sum": "{a} + {p}", "max": "tl.maximum({a}, {p})", "min": "tl.minimum({a}, {p})", "prod": "{a} * {p}"}
        # a softmax's sum of exp(x - max) swept with its maximum (online: one read of the row for both)
        online = {id(m): s for m, s in online_pairs(reds)}
        for i, r in enumerate(reds):  # children first: an inner reduction is an accumulator by now
            if id(r) in accs:
                continue
            ext = math.prod(v.extent for v in r.axes)
            pair = online.get(id(r))
            body.append(f"acc{i} = tl.full([BM, 1], {init[r.op]}, tl.float32)")
            if pair is not None:
                body.append(f"acc{reds.index(pair)} = tl.full([BM, 1], 0.0, tl.float32)")
            body += [f"for start in range(0, {ext}, BR):", "    j = start + tl.arange(0, BR)[None, :]"]
            inner: list[str] = []
            masks = [(row_vars, "rmask")]
            bind_row_axes(r.axes, cols, env, inner, "j", masks)
            p = Printer(Ctx(env, masks, dict(accs), own_masks=True, evict=(row_vars, "evict_last")).render,
                        prefix=f"u{i}_", dedupe=True)
            part = p(r)
            if pair is None:
                inner += p.lines + [f"acc{i} = " + comb[r.op].format(a=f"acc{i}", p=part)]
            else:
                inner += online_sweep(p, r, pair, part, f"acc{i}", f"acc{reds.index(pair)}", env, masks)
                accs[id(pair)] = f"acc{reds.index(pair)}"
            body += ["    " + ln for ln in inner]
            accs[id(r)] = f"acc{i}"
        if k.also:  # the row's sibling values, from the accumulators
            pr = Printer(Ctx(env, [(row_vars, "rmask")], accs).render, prefix="w", dedupe=True)
            also = [pr(e) for _, e in k.also]
            body += pr.lines + row_stores(k, env, also)
        if cols:
            body += [f"for start in range(0, {n}, BR):", "    j = start + tl.arange(0, BR)[None, :]"]
            inner = [f"cmask = j < {n}"]
            py_decode(cols, "j", inner, env)
            masks = [(row_vars, "rmask"), (frozenset(c for c, _ in cols), "cmask")]
        else:
            inner, masks = [], [(row_vars, "rmask")]
        p = Printer(Ctx(env, masks, accs, evict=(row_vars, "evict_first")).render, prefix="v", dedupe=True)
        val = p(k.expr)
        inner += p.lines
        # the output streams past L2: it should not evict rows the other programs still sweep
        store(inner, val, ', eviction_policy="evict_first"')
        body += ["    " + ln for ln in inner] if cols else inner
    src = signature(k, ["BM: tl.constexpr", "BR: tl.constexpr"]) + "\n"
    return src + "\n".join("    " + ln for ln in head + body) + "\n"


def online_sweep(p: Printer, m: Reduce, s: Reduce, part: str, acc_m: str, acc_s: str, env: dict[str, str],
                 masks: list[tuple[frozenset[str], str]]) -> list[str]:
    """The lines of one chunk of a sweep computing the row maximum `m` (its chunk's maximum already
    printed by `p` as `part`) and the sum `s` of exp(E - m) together: the running sum is rescaled by
    exp(old - new maximum). A maximum of -inf (every element so far -inf) is taken as 0 in the
    exponents, so -inf elements add 0 instead of exp(nan)."""
    for a, b in zip(s.axes, m.axes):  # the sum's coordinates are the maximum's: one load of the chunk
        env[a.name] = env[b.name]
    masks.append((frozenset(a.name for a in s.axes), masks[-1][1]))
    new, safe = f"{acc_m}_new", f"{acc_m}_z"
    p.lines += [f"{new} = tl.maximum({acc_m}, {part})", f"{safe} = tl.where({new} == float(\"-inf\"), 0.0, {new})"]
    p.fixed[id(m)] = safe  # the sum's body reads this very node (online_pairs)
    total = p(s)
    return p.lines + [f"{acc_s} = {acc_s} * tl.exp({acc_m} - {safe}) + {total}", f"{acc_m} = {new}"]


def _tile(code: str, ty: str, shape: str) -> str:
    """An operand tile; a constant operand (a zero initial state, say) is a Python number, not a tensor."""
    try:
        float(code)
    except ValueError:
        return f"tl.broadcast_to(({code}).to({ty}), {shape})"
    return f"tl.full({shape}, {code}, {ty})"


def matmul(k: Kernel, sched: Schedule) -> str:
    g = split_gemm(k)
    dot, a_e, b_e, kname = g.dot, g.a, g.b, g.k.name
    m_vars, n_vars, b_vars_ = g.rows, g.cols, g.batch
    M, N, K = math.prod(e for _, e in m_vars), math.prod(e for _, e in n_vars), g.k.extent
    B = math.prod(e for _, e in b_vars_)
    # a batch past the grid's y limit folds into axis 0 (batch-major)
    grid = (["pid = tl.program_id(0)", f"bid = pid // (tl.cdiv({M}, BM) * tl.cdiv({N}, BN))",
             f"pid = pid % (tl.cdiv({M}, BM) * tl.cdiv({N}, BN))"] if fold_grid(sched, B) else
            ["pid = tl.program_id(0)", "bid = tl.program_id(1)"])
    head = [*grid, f"num_m = tl.cdiv({M}, BM)", f"num_n = tl.cdiv({N}, BN)",
            "group = GROUP_M * num_n", "first_m = (pid // group) * GROUP_M",
            "gsz = tl.minimum(num_m - first_m, GROUP_M)",
            "pm = first_m + (pid % group) % gsz", "pn = (pid % group) // gsz",
            "mo = pm * BM + tl.arange(0, BM)", "no = pn * BN + tl.arange(0, BN)",
            f"mmask = (mo < {M})[:, None]", f"nmask = (no < {N})[None, :]"]
    env: dict[str, str] = {}
    py_decode(b_vars_, "bid", head, env)
    m_env, n_env = dict(env), dict(env)
    ma, nb = [], []
    py_decode(m_vars, "mo[:, None]", ma, m_env)
    py_decode(n_vars, "no[None, :]", nb, n_env)
    head += ma + nb
    prec = sched.get("input_precision", "ieee")
    in_ty = a_e.dtype if a_e.dtype in ("f16", "bf16") and b_e.dtype == a_e.dtype else "f32"
    # a GEMV is memory-bound: accumulating fp32 in fp64 costs nothing there and keeps the long sums
    # of a reassociated reduction (sum through linear) as exact as the reference's
    wide = in_ty == "f32" and min(M, N) == 1
    loop = [f"acc = tl.zeros([BM, BN], {'tl.float64' if wide else 'tl.float32'})", f"for k0 in range(0, {K}, BK):"]
    a_env = dict(m_env, **{kname: "ka"})
    b_env = dict(n_env, **{kname: "kb"})
    mv, nv = frozenset(n for n, _ in m_vars), frozenset(n for n, _ in n_vars)
    kv = frozenset([kname])
    # TMA descriptors for plain operands where the schedule asks (Hopper); pointer loads otherwise
    tma_ops = tma.loads(k, sched.get("BK", 32)) if tma.wanted(sched) and not wide else {}
    loop = [setup for setup, _ in tma_ops.values()] + loop
    # an operand indexed by the output's digits (a GEMM whose epilogue transposes) reads over mo / no
    # again where the digits join back: Triton then sees the loads' contiguity
    digits = {**digits_of(m_vars, Var("mo", M)), **digits_of(n_vars, Var("no", N))}
    a_env.update(mo="mo[:, None]")
    b_env.update(no="no[None, :]")
    pa = Printer(Ctx(a_env, [(mv | {"mo"}, "mmask"), (kv, "kamask")]).render, prefix="a")
    a_code = tma_ops[id(a_e)][1] if id(a_e) in tma_ops else pa(flat_loads(a_e, digits))
    pb = Printer(Ctx(b_env, [(kv, "kbmask"), (nv | {"no"}, "nmask")]).render, prefix="b")
    b_code = tma_ops[id(b_e)][1] if id(b_e) in tma_ops else pb(flat_loads(b_e, digits))
    if wide:
        in_ty = "f64"
    inner = ["ka = k0 + tl.arange(0, BK)[None, :]", "kb = k0 + tl.arange(0, BK)[:, None]",
             f"kamask = ka < {K}", f"kbmask = kb < {K}"] + pa.lines + pb.lines
    # an operand may not depend on every tile axis (a GEMV's vector): broadcast it to the tile
    a_tile, b_tile = _tile(a_code, TL[in_ty], "(BM, BK)"), _tile(b_code, TL[in_ty], "(BK, BN)")
    inner.append(f"acc += tl.dot({a_tile}, {b_tile}, input_precision=\"{prec}\")" if in_ty == "f32" else
                 f"acc += tl.dot({a_tile}, {b_tile})")
    loop += ["    " + ln for ln in inner]
    ep_env = dict(m_env)
    ep_env.update(n_env)
    ctx = Ctx(ep_env, [(mv, "mmask"), (nv, "nmask")], accs={id(dot): "acc"})
    p = Printer(ctx.render, prefix="e")
    val = p(k.expr)
    strides = k.out.strides()
    flat = " + ".join(f"{ep_env[v.name]} * {s}" if s != 1 else ep_env[v.name]
                      for v, s in zip(k.coords, strides)) or "0"
    tail = p.lines + [f"tl.store(out_ptr + ({flat}) + (mo[:, None] * 0 + no[None, :] * 0), "
                      f"{store_value(val, k.out.dtype, '[BM, BN]')}, mask=mmask & nmask)"]
    sig = signature(k, ["BM: tl.constexpr", "BN: tl.constexpr", "BK: tl.constexpr", "GROUP_M: tl.constexpr"])
    return sig + "\n" + "\n".join("    " + ln for ln in head + loop + tail) + "\n"
