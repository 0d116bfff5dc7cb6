"""Kernel IR -> Pallas source. The tile templates are Triton's (pointwise, row reductions, GEMM in grouped
tile order) spelled in JAX: refs indexed with index arrays (`plt.load(ref.at[idx], mask=...)`), `jnp`
math, `lax.fori_loop` for the loops over K and over chunks of long rows, `jnp.dot` with fp32 accumulation.
Buffers are flat 1-D refs, so any index expression of kernel IR (broadcasts, permutes, gathers) is a load."""

from __future__ import annotations

import re

from ir.kernel.analysis import gemm_dims, split_gemm
from ir.kernel.ir import Const, Expr, Kernel, Load, Reduce, size_args
from ir.kernel.schedule import Schedule
from ir.sym import is_dynamic

from ..base import UnsupportedKernel
from ..exprs import FLOATS, Printer, comp, fold_grid, free_vars, py_const, py_decode, row_reduction
from ..triton.ops import MAX_SINGLE_PASS, Ctx

JNP = {"float16": "jnp.float16", "bfloat16": "jnp.bfloat16", "float32": "jnp.float32", "float64": "jnp.float64",
       "int8": "jnp.int8", "int16": "jnp.int16", "int32": "jnp.int32", "int64": "jnp.int64", "uint8": "jnp.uint8",
       "int1": "jnp.bool_", "sigmoid": "jax.nn.sigmoid", "rsqrt": "jax.lax.rsqrt", "erf": "_akg_erf"}
PRELUDE = '''
@functools.cache
def _akg_jax_devices():
    """JAX's devices, JAX started here once: its start-up leaves the CUDA runtime on its last GPU, and
    torch's current device (which its allocations follow and its DLPack export checks) is put back."""
    keep = torch.cuda.current_device() if torch.cuda.is_available() else None
    devices = jax.devices()
    if keep is not None:
        torch.cuda.set_device(keep)
    return devices


def _akg_on(t):
    """`t`'s GPU made torch's current device while JAX reads or writes it (torch exports only the
    current device's tensors; a model may live on any GPU). On exit the device before it is back."""
    _akg_jax_devices()
    return torch.cuda.device(t.device) if t.device.type == "cuda" else contextlib.nullcontext()


def _akg_tanh(x):
    return jnp.tanh(x)


def _akg_erf(x):  # Pallas' Triton lowering has no erf: series near 0, else 1 - erfc (fractional error < 1.2e-7)
    ax = jnp.abs(x)
    x2 = x * x
    near = 1.1283791671 * x * (1.0 + x2 * (-1.0 / 3 + x2 * (1.0 / 10 + x2 * (-1.0 / 42 + x2 * (1.0 / 216 + x2 * (
        -1.0 / 1320))))))
    t = 1.0 / (1.0 + 0.5 * ax)
    y = 1.0 - t * jnp.exp(-x2 - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (
        -0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277)))))))))
    return jnp.where(ax < 0.5, near, jnp.where(x >= 0, y, -y))


def _akg_bf16(x):  # fp32 rounded to the nearest bf16 (even on ties), kept in fp32
    return x.astype(jnp.bfloat16).astype(jnp.float32)


def _akg_round(x):  # round half to even, as torch.round
    r = jnp.floor(x + 0.5)
    tie = (r - x) == 0.5
    odd = (r - 2.0 * jnp.floor(r * 0.5)) != 0.0
    return jnp.where(tie & odd, r - 1.0, r)


def _akg_ld(ref, idx, mask, other):  # a masked gather; index and mask broadcast to one shape
    idx, mask = jnp.broadcast_arrays(idx, mask)
    return plt.load(ref.at[idx], mask=mask, other=other)


_AKG_INTERPRET = [False]  # set by the launcher before tracing


def _akg_dot_precision(name):
    """The contraction's input precision (left unnamed, the GPU would take plain TF32); XLA's CPU (the
    interpreter) takes no TF32 algorithm and computes fp32 exactly."""
    if _AKG_INTERPRET[0]:
        return jax.lax.Precision.HIGHEST
    return {"ieee": jax.lax.DotAlgorithmPreset.F32_F32_F32, "tf32": jax.lax.DotAlgorithmPreset.TF32_TF32_F32,
            "tf32x3": jax.lax.DotAlgorithmPreset.TF32_TF32_F32_X3}[name]


def _akg_st(ref, idx, val, mask):  # a masked scatter
    idx, mask = jnp.broadcast_arrays(idx, mask)
    if _AKG_INTERPRET[0]:
        # masked-off lanes may alias live ones (wrapped coordinates); the interpreter writes every lane back
        # (old value where masked), so send them out of bounds, where its scatter drops them (the GPU
        # never writes a masked lane, and keeps the index's contiguity)
        idx = jnp.where(mask, idx, ref.shape[0])
    plt.store(ref.at[idx], jnp.broadcast_to(val, idx.shape), mask=mask)
'''


def to_jax(code: str) -> str:
    """A Triton-language expression (from the shared op table) in jax.numpy spelling."""
    code = code.replace(".to(", ".astype(")
    return re.sub(r"\btl\.(\w+)", lambda m: JNP.get(m.group(1), "jnp." + m.group(1)), code)


def jdt(dtype: str) -> str:
    return {"f16": "jnp.float16", "bf16": "jnp.bfloat16", "f32": "jnp.float32", "f64": "jnp.float64",
            "i8": "jnp.int8", "i16": "jnp.int16", "i32": "jnp.int32", "i64": "jnp.int64", "u8": "jnp.uint8",
            "bool": "jnp.bool_"}[dtype]


class _JCtx(Ctx):
    columns = False  # the tile is one column wide (BR = 1): a product is just the masked element

    def render(self, e: Expr, p: Printer) -> str:
        if isinstance(e, Load):
            strides = e.buf.strides()
            flat = " + ".join(f"({p(i)}) * {s}" if s != 1 else f"({p(i)})" for i, s in zip(e.index, strides)) or "0"
            vs = free_vars(e, self.fv)
            name = f"{e.buf.name}_ref"
            if not vs and e.mask is None:
                return f"{name}[{flat}]"
            mask = self.mask_for(vs)
            if e.mask is not None:
                mask = f"{mask} & ({p(e.mask)})" if mask else f"({p(e.mask)})"
            return f"_akg_ld({name}, {flat}, {mask or 'True'}, {py_const(e.other, e.buf.dtype)})"
        if isinstance(e, Reduce) and id(e) not in self.accs:
            return self.reduce(e, p)
        if isinstance(e, Reduce):
            return self.accs[id(e)]
        if isinstance(e, Const) and is_dynamic(e.value):  # a run-time size: an array, so it casts like one
            return f"jnp.asarray({e.value}, dtype={jdt(e.dtype)})"
        return to_jax(super().render(e, p))

    def reduce(self, e: Reduce, p: Printer) -> str:
        m = self.reduce_mask(e)
        body = p(e.body)
        if comp(e.body.dtype) in FLOATS and e.body.dtype != comp(e.body.dtype):
            body = f"{body}.astype(jnp.float32)"
        fill = {"sum": "0.0", "dot": "0.0", "prod": "1.0", "max": 'float("-inf")', "min": 'float("inf")',
                "argmax": 'float("-inf")', "argmin": 'float("inf")'}[e.op]
        f = {"sum": "jnp.sum", "dot": "jnp.sum", "prod": "jnp.prod", "max": "jnp.max", "min": "jnp.min",
             "argmax": "jnp.argmax", "argmin": "jnp.argmin"}[e.op]
        if e.op == "prod" and self.columns:
            return f"jnp.where({m}, {body}, 1.0)"
        if e.op.startswith("arg"):  # the GPU lowering wants 32-bit indices
            return f"jax.lax.{e.op}(jnp.where({m}, {body}, {fill}), 1, jnp.int32)[:, None].astype(jnp.int64)"
        return f"{f}(jnp.where({m}, {body}, {fill}), axis=1, keepdims=True)"


def _store_value(val: str, dtype: str, shape: str) -> str:
    """`val` broadcast to the tile and converted to the output type (constants included)."""
    if dtype == "bool":
        return f"(jnp.zeros({shape}, jnp.int32) + jnp.asarray({val}).astype(jnp.int32) != 0)"
    zero = "0.0" if dtype in FLOATS else "0"
    full = f"(jnp.full({shape}, {zero}, {jdt(comp(dtype))}) + {val})"
    return f"{full}.astype({jdt(dtype)})"


def _arange(n: str) -> str:
    return f"jnp.arange(0, {n}, dtype=jnp.int32)"


def _sig(k: Kernel) -> str:
    refs = [f"{b.name}_ref" for b in k.inputs()] + ["out_ref"] + [f"{b.name}_out" for b, _ in k.also]
    sizes = size_args(k)  # run-time sizes (--dynamic): Python ints bound per size before tracing
    return f"def {k.name}({', '.join(refs + (['*', *sizes] if sizes else []))}):"


def _fn(k: Kernel, consts: dict[str, int], lines: list[str]) -> str:
    head = [f"{n} = {v}" for n, v in consts.items()]
    return _sig(k) + "\n" + "\n".join("    " + ln for ln in head + lines) + "\n"


def pointwise(k: Kernel, sched: Schedule) -> str:
    n = k.out.numel
    lines = ["pid = pl.program_id(0)", f"offs = pid * BLOCK + {_arange('BLOCK')}", f"dmask = offs < {n}"]
    env: dict[str, str] = {}
    py_decode([(v.name, v.extent) for v in k.coords], "offs", lines, env)
    ctx = _JCtx(env, [(frozenset(v.name for v in k.coords), "dmask")])
    p = Printer(ctx.render)
    val = p(k.expr)
    lines += p.lines
    # the output tile is this program's block (BlockSpec (BLOCK,)); the last one is masked past the end
    lines.append(f"plt.store(out_ref.at[pl.ds(0, BLOCK)], {_store_value(val, k.out.dtype, '(BLOCK,)')}, "
                 "mask=dmask)")
    return _fn(k, {"BLOCK": sched["BLOCK"]}, lines)


def reduction(k: Kernel, sched: Schedule) -> str:
    columns = any(r.op == "prod" for r in k.reductions())  # no product fold in the GPU lowering: a column a step
    rr = row_reduction(k, dict(sched, BR=1) if columns else sched, MAX_SINGLE_PASS, nested_ok=True)
    reds, red, rows, br, single = rr.reds, rr.red, rr.rows, rr.br, rr.single
    head = ["pid = pl.program_id(0)", f"rows = pid * BM + {_arange('BM')}[:, None]", f"rmask = rows < {rows}"]
    env: dict[str, str] = {}
    py_decode([(v.name, v.extent) for v in k.coords], "rows", head, env)
    red_vars = frozenset(v.name for r in reds for v in r.axes)
    row_vars = frozenset(v.name for v in k.coords)

    def bind_red(lines: list[str], jexpr: str) -> None:
        lines += [f"j = {jexpr}", f"jmask = j < {red}"]
        for r in reds:
            py_decode([(v.name, v.extent) for v in r.axes], "j", lines, env)

    body: list[str] = []
    if single:
        bind_red(body, f"{_arange('BR')}[None, :]")
        ctx = _JCtx(env, [(row_vars, "rmask"), (red_vars, "jmask")])
        ctx.columns = columns
        p = Printer(ctx.render)
        val = p(k.expr)
        also = [p(e) for _, e in k.also]
        body += p.lines
    else:  # long rows: a fori_loop over chunks carrying one accumulator per reduction
        init = {"sum": "0.0", "dot": "0.0", "max": 'float("-inf")', "min": 'float("inf")', "prod": "1.0"}
        comb = {"sum": "{a} + {p}", "dot": "{a} + {p}", "max": "jnp.maximum({a}, {p})",
                "min": "jnp.minimum({a}, {p})", "prod": "{a} * {p}"}
        accs: dict[int, str] = {}
        # independent reductions share one loop (the row read once); nested ones (a variance around its
        # mean) loop once per level, inner first, so an outer one reads the inner's total
        sweeps = [reds] if not rr.nested else [[r] for r in reds]
        for n_sweep, sweep in enumerate(sweeps):
            own = {id(r): f"acc{reds.index(r)}" for r in sweep}
            names = ", ".join(own.values()) + ","
            inner: list[str] = []
            bind_red(inner, f"c * BR + {_arange('BR')}[None, :]")
            ctx = _JCtx(env, [(row_vars, "rmask"), (red_vars, "jmask")], dict(accs))
            ctx.columns = columns
            p = Printer(ctx.render, prefix=f"u{n_sweep}_" if rr.nested else "u")
            parts = [p(r) for r in sweep]
            inner += p.lines
            inner.append("return (" + ", ".join(comb[r.op].format(a=own[id(r)], p=parts[i])
                                                 for i, r in enumerate(sweep)) + ",)")
            fn = f"chunk{n_sweep}" if rr.nested else "chunk"
            body += [f"def {fn}(c, accs):", f"    {names} = accs"] + ["    " + ln for ln in inner]
            start = ", ".join(f"jnp.full((BM, 1), {init[r.op]}, jnp.float32)" for r in sweep) + ","
            body.append(f"{names} = jax.lax.fori_loop(0, {-(-red // br)}, {fn}, ({start}))")
            accs.update(own)
        p2 = Printer(_JCtx(env, [(row_vars, "rmask")], accs).render, prefix="v")
        val = p2(k.expr)
        also = [p2(e) for _, e in k.also]
        body += p2.lines
    stores = [("out_ref", val, k.out.dtype), *((f"{b.name}_out", a, b.dtype) for (b, _), a in zip(k.also, also))]
    for ref, v, dt in stores:
        body.append(f"plt.store({ref}.at[pl.ds(0, BM), pl.ds(0, 1)], {_store_value(v, dt, '(BM, 1)')}, "
                    "mask=rmask)")  # this program's (BM, 1) block of each output
    return _fn(k, {"BM": sched["BM"], "BR": br}, head + body)


def matmul(k: Kernel, sched: Schedule) -> str:
    g = split_gemm(k)
    if not hasattr(g.dot.body, "op") or g.dot.body.op != "mul":  # type: ignore[attr-defined]
        raise UnsupportedKernel("not a single GEMM")
    M, N, K, B = gemm_dims(k)
    tiles = -(-M // sched["BM"]) * -(-N // sched["BN"])
    grid = (["pid = pl.program_id(0)", f"bid = pid // {tiles}", f"pid = pid % {tiles}"] if fold_grid(sched, B) else
            ["pid = pl.program_id(0)", "bid = pl.program_id(1)"])
    head = [*grid, f"num_m = {-(-M // sched['BM'])}", f"num_n = {-(-N // sched['BN'])}",
            "group = GROUP_M * num_n", "first_m = (pid // group) * GROUP_M",
            "gsz = jnp.minimum(num_m - first_m, GROUP_M)",
            "pm = first_m + (pid % group) % gsz", "pn = (pid % group) // gsz",
            f"mo = pm * BM + {_arange('BM')}", f"no = pn * BN + {_arange('BN')}",
            f"mmask = (mo < {M})[:, None]", f"nmask = (no < {N})[None, :]"]
    env: dict[str, str] = {}
    py_decode(g.batch, "bid", head, env)
    m_env, n_env = dict(env), dict(env)
    ma: list[str] = []
    nb: list[str] = []
    py_decode(g.rows, "mo[:, None]", ma, m_env)
    py_decode(g.cols, "no[None, :]", nb, n_env)
    head += ma + nb
    kname = g.k.name
    mv, nv, kv = frozenset(n for n, _ in g.rows), frozenset(n for n, _ in g.cols), frozenset([kname])
    pa = Printer(_JCtx(dict(m_env, **{kname: "ka"}), [(mv, "mmask"), (kv, "kamask")]).render, prefix="a")
    a_code = pa(g.a)
    pb = Printer(_JCtx(dict(n_env, **{kname: "kb"}), [(kv, "kbmask"), (nv, "nmask")]).render, prefix="b")
    b_code = pb(g.b)
    in_ty = g.a.dtype if g.a.dtype in ("f16", "bf16") and g.b.dtype == g.a.dtype else "f32"
    prec = f"_akg_dot_precision({str(sched.get('input_precision', 'ieee'))!r})"
    inner = [f"ka = k0 * BK + {_arange('BK')}[None, :]", f"kb = k0 * BK + {_arange('BK')}[:, None]",
             f"kamask = ka < {K}", f"kbmask = kb < {K}"] + pa.lines + pb.lines
    # an operand may not depend on every tile axis (a GEMV's vector): broadcast it to the tile
    inner += [f"a = jnp.broadcast_to(jnp.asarray({a_code}).astype({jdt(in_ty)}), (BM, BK))",
              f"b = jnp.broadcast_to(jnp.asarray({b_code}).astype({jdt(in_ty)}), (BK, BN))",
              "return acc + jnp.dot(a, b, preferred_element_type=jnp.float32"
              + (f", precision={prec})" if in_ty == "f32" else ")")]
    loop = ["def step(k0, acc):"] + ["    " + ln for ln in inner]
    loop.append(f"acc = jax.lax.fori_loop(0, {-(-K // sched['BK'])}, step, jnp.zeros((BM, BN), jnp.float32))")
    ep_env = dict(m_env)
    ep_env.update(n_env)
    p = Printer(_JCtx(ep_env, [(mv, "mmask"), (nv, "nmask")], accs={id(g.dot): "acc"}).render, prefix="e")
    val = p(k.expr)
    flat = " + ".join(f"{ep_env[v.name]} * {s}" if s != 1 else ep_env[v.name]
                      for v, s in zip(k.coords, k.out.strides())) or "0"
    tail = p.lines + [f"idx = ({flat}) + (mo[:, None] * 0 + no[None, :] * 0)",
                      f"_akg_st(out_ref, idx, {_store_value(val, k.out.dtype, '(BM, BN)')}, mmask & nmask)"]
    consts = {"BM": sched["BM"], "BN": sched["BN"], "BK": sched["BK"], "GROUP_M": sched["GROUP_M"]}
    return _fn(k, consts, head + loop + tail)


