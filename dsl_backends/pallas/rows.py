"""Kernel IR -> Pallas row-fused kernels (softmax, norms) for GPU targets: Triton's row template spelled in
JAX. Each program owns BM rows. When a row fits one BR tile it is loaded once and every reduction and the
output reuse it; otherwise each reduction sweeps the row in BR chunks (a `fori_loop`, inner reductions
first) and a last loop writes the output. Outputs are whole flat refs written by scatter (`_akg_st`): a
row's columns need not be contiguous (a softmax over channels)."""

from __future__ import annotations

import math

from ir.kernel import siblings
from ir.kernel.analysis import online_pairs
from ir.kernel.ir import Kernel, Reduce
from ir.kernel.schedule import Schedule

from ..exprs import Printer, bind_row_axes, pow2, py_decode, row_coords
from .render import _arange, _fn, _JCtx, _store_value

_INIT = {"sum": "0.0", "max": 'float("-inf")', "min": 'float("inf")', "prod": "1.0"}
_COMB = {"sum": "{a} + {p}", "max": "jnp.maximum({a}, {p})", "min": "jnp.minimum({a}, {p})", "prod": "{a} * {p}"}


def rownorm(k: Kernel, sched: Schedule) -> str:
    row_c, cols = row_coords(k)
    n, rows = math.prod(e for _, e in cols), math.prod(v.extent for v in row_c)
    reds = list(dict.fromkeys(k.reductions()))
    br = sched["BR"]
    single = all(pow2(math.prod(v.extent for v in r.axes)) <= br for r in reds) and pow2(n) <= br
    head = ["pid = pl.program_id(0)", f"rows = pid * BM + {_arange('BM')}[:, None]", f"rmask = rows < {rows}"]
    env: dict[str, str] = {}
    py_decode([(v.name, v.extent) for v in row_c], "rows", head, env)
    row_vars = frozenset(v.name for v in row_c)
    col_vars = frozenset(c for c, _ in cols)

    def store(lines: list[str], val: str) -> None:
        flat = " + ".join(f"({env[v.name]}) * {st}" if st != 1 else f"({env[v.name]})"
                          for v, st in zip(k.coords, k.out.strides())) or "0"
        shape, mask = ("(BM, BR)", "rmask & cmask") if cols else ("(BM, 1)", "rmask")
        lines.append(f"_akg_st(out_ref, {flat}, {_store_value(val, k.out.dtype, shape)}, {mask})")

    def sibling_stores(values: list[str]) -> list[str]:
        # one value per row, at the row's place in each sibling output
        at_rows = siblings.row_vars(k)
        out = []
        for (b, _), v in zip(k.also, values):
            at = " + ".join(f"({env[c.name]}) * {st}" for c, st in zip(k.coords, b.strides()) if c in at_rows)
            out.append(f"_akg_st({b.name}_out, {at or 'rows * 0'}, {_store_value(v, b.dtype, '(BM, 1)')}, rmask)")
        return out

    body: list[str] = []
    if single:
        masks: list[tuple[frozenset[str], str]] = [(row_vars, "rmask")]
        body.append(f"j = {_arange('BR')}[None, :]")
        if cols:
            body.append(f"cmask = j < {n}")
            py_decode(cols, "j", body, env)
            masks.append((col_vars, "cmask"))
        for r in reds:
            bind_row_axes(r.axes, cols, env, body, "j", masks)
        ctx = _JCtx(env, masks, own_masks=True)
        p = Printer(ctx.render, dedupe=True)
        val = p(k.expr)
        also = [p(e) for _, e in k.also]
        body += p.lines
        store(body, val)
        body += sibling_stores(also)
    else:
        accs: dict[int, str] = {}
        # a softmax's sum of exp(x - max) swept with its maximum (online: one read of the row for both)
        online = {id(m): s for m, s in online_pairs(reds)}
        for i, r in enumerate(reds):  # children first: an inner reduction is an accumulator by now
            if id(r) in accs:
                continue
            ext = math.prod(v.extent for v in r.axes)
            inner: list[str] = []
            masks = [(row_vars, "rmask")]
            bind_row_axes(r.axes, cols, env, inner, "j", masks)
            p = Printer(_JCtx(env, masks, dict(accs), own_masks=True).render, prefix=f"u{i}_", dedupe=True)
            part = p(r)
            pair = online.get(id(r))
            start = f"jnp.full((BM, 1), {_INIT[r.op]}, jnp.float32)"
            if pair is None:
                inner += p.lines + [f"return {_COMB[r.op].format(a='acc', p=part)}"]
                names = f"acc{i}"
            else:
                inner += _online(p, r, pair, part, env, masks)
                names = f"acc{i}, acc{reds.index(pair)}"
                start = f"({start}, jnp.full((BM, 1), 0.0, jnp.float32))"
                accs[id(pair)] = f"acc{reds.index(pair)}"
            body += [f"def sweep{i}(c, acc):", f"    j = c * BR + {_arange('BR')}[None, :]"]
            body += ["    " + ln for ln in inner]
            body.append(f"{names} = jax.lax.fori_loop(0, {-(-ext // br)}, sweep{i}, {start})")
            accs[id(r)] = f"acc{i}"
        if k.also:  # the row's sibling values, from the accumulators
            pr = Printer(_JCtx(env, [(row_vars, "rmask")], accs).render, prefix="w", dedupe=True)
            also = [pr(e) for _, e in k.also]
            body += pr.lines + sibling_stores(also)
        if cols:
            inner = [f"j = c * BR + {_arange('BR')}[None, :]", f"cmask = j < {n}"]
            py_decode(cols, "j", inner, env)
            p = Printer(_JCtx(env, [(row_vars, "rmask"), (col_vars, "cmask")], accs).render, prefix="v", dedupe=True)
            val = p(k.expr)
            inner += p.lines
            store(inner, val)
            body += ["def write(c, carry):"] + ["    " + ln for ln in inner] + ["    return carry"]
            body.append(f"jax.lax.fori_loop(0, {-(-n // br)}, write, 0)")
        else:
            p = Printer(_JCtx(env, [(row_vars, "rmask")], accs).render, prefix="v", dedupe=True)
            val = p(k.expr)
            body += p.lines
            store(body, val)
    return _fn(k, {"BM": sched["BM"], "BR": br}, head + body)


def _online(p: Printer, m: Reduce, s: Reduce, part: str, env: dict[str, str],
            masks: list[tuple[frozenset[str], str]]) -> list[str]:
    """The body of a chunk computing the row maximum `m` (the chunk's maximum printed by `p` as `part`)
    and the sum `s` of exp(E - m) together, carried as `acc` = (maximum, sum): the running sum is rescaled
    by exp(old - new maximum); a maximum of -inf (every element so far -inf) is taken as 0 in the exponents."""
    for a, b in zip(s.axes, m.axes):  # the sum's coordinates are the maximum's: one load of the chunk
        env[a.name] = env[b.name]
    masks.append((frozenset(a.name for a in s.axes), masks[-1][1]))
    p.lines += ["acc_m, acc_s = acc", f"new = jnp.maximum(acc_m, {part})",
                'safe = jnp.where(new == float("-inf"), 0.0, new)']
    p.fixed[id(m)] = "safe"  # the sum's body reads this very node (online_pairs)
    total = p(s)
    return p.lines + [f"return (new, acc_s * jnp.exp(acc_m - safe) + {total})"]
