"""Pallas for TPU targets: kernels written the TPU way, checked by lowering to Mosaic and run in TPU
interpret mode where no TPU is present.

Every kernel is a pallas_call over a grid of blocks described by BlockSpecs; blocks live in VMEM and
obey the (8, 128) tiling (their last two dimensions are multiples of (8, 128) or whole). Each value of
a kernel has one axis per variable (the output's coordinates, then every reduction's and scan's
variable), of extent 1 where it does not depend on it; a reduction keeps its axis at extent 1.
Index arithmetic does not happen inside a kernel (a TPU core does not gather): each distinct load is
put in that axis layout by XLA outside the call (a reshape or transpose where the index is a
permutation of the buffer's dimensions, a gather otherwise), so the kernel only does vector math.
- generic: the grid blocks the first axis; reductions run along whole axes of the block (lanes or
  sublanes); a scan is a masked reduction over its axis.
- matmul (one contraction plus its prologue and epilogue): grid (batch, M / TM, N / TN, K / TK) with
  the K axis innermost ("arbitrary"), `lax.dot_general` on the MXU with an fp32 accumulator in VMEM
  scratch, the epilogue applied on the last K step.
"""

from __future__ import annotations

import math

from hardware_models.spec import HardwareModel
from ir.kernel.analysis import split_gemm
from ir.kernel.ir import Const, Expr, IOp, Kernel, Load, Op, Reduce, Scan, Var, children, free_vars, size_args, walk
from ir.kernel.schedule import Schedule

from ..base import Ref, UnsupportedKernel
from ..exprs import Printer, py_const
from ..triton.ops import IOPS, Ctx, render_op
from .render import jdt, to_jax

# what a TPU kernel holds in VMEM: 32-bit values (64-bit integers, bools and half floats are converted
# outside the call; XLA handles them there)
KERNEL_DT = {"f32": "f32", "f64": "f32", "bf16": "f32", "f16": "f32", "i64": "i32", "i32": "i32", "i16": "i32",
             "i8": "i32", "u8": "i32", "bool": "i32"}


def _check_types(k: Kernel) -> None:
    if size_args(k):
        raise UnsupportedKernel("TPU kernels take fixed sizes (--dynamic is a GPU/CPU option)")
    for b in [*k.inputs(), k.out]:
        if b.dtype == "f64":  # float64 steps inside a kernel compute in float32; the verifier judges them
            raise UnsupportedKernel(f"float64 buffer {b.name}: a TPU has no float64 unit")
    for b in [*k.inputs(), k.out]:
        if b.numel >= 2**31:
            raise UnsupportedKernel(f"buffer {b.name} has 2^31 or more elements (TPU kernels index in 32 bits)")


def _axes(k: Kernel) -> list[Var]:
    """The kernel's axes: its coordinates, then each reduction's and scan's variable (first seen)."""
    out: dict[str, Var] = {v.name: v for v in k.coords} or {"_unit": Var("_unit", 1)}
    for e in walk(k.expr):
        for v in (e.axes if isinstance(e, Reduce) else (e.axis,) if isinstance(e, Scan) else ()):
            out.setdefault(v.name, v)
    if len(out) == 1:  # a block's last two dims follow the (8, 128) rule: give a 1-D domain a lane axis
        out["_lane"] = Var("_lane", 1)
    return list(out.values())


def _loads(k: Kernel) -> list[Load]:
    seen: dict[Load, None] = {}
    for e in walk(k.expr):
        if isinstance(e, Load):
            seen.setdefault(e, None)
    return list(seen)


class _Layout:
    """Axis positions and extents; a value's shape is its variables' extents, 1 elsewhere."""

    def __init__(self, axes: list[Var], block0: int | None = None) -> None:
        self.axes, self.pos = axes, {v.name: i for i, v in enumerate(axes)}
        self.block0 = block0

    def shape(self, names: frozenset[str], blocked: bool = False) -> tuple[int, ...]:
        return tuple((self.block0 if blocked and i == 0 and self.block0 else v.extent) if v.name in names else 1
                     for i, v in enumerate(self.axes))


def _gather(ld: Load, lay: _Layout, src: str, lines: list[str], tag: str = "_v") -> frozenset[str]:
    """Lines (outside the call) putting `ld` in the axis layout from the flat array `src` as `tag`;
    its variables."""
    fv = free_vars(ld) & set(lay.pos)
    shape = lay.shape(fv)
    dims = [(i, x) for i, x in enumerate(ld.index) if not (isinstance(x, Const) and ld.buf.shape[i] == 1)]
    plain = ld.mask is None and all(isinstance(x, Var) and x.extent == ld.buf.shape[i] for i, x in dims) and \
        len({x.name for _, x in dims}) == len(dims)  # type: ignore[union-attr]
    if plain:
        order = sorted(range(len(dims)), key=lambda d: lay.pos[dims[d][1].name])  # type: ignore[union-attr]
        kept = "(" + "".join(f"{ld.buf.shape[i]}, " for i, _ in dims) + ")"
        val = f"{src}.reshape({kept})" + (f".transpose({tuple(order)})" if order != sorted(order) else "")
        lines.append(f"{tag} = {val}.reshape({shape})")
        return fv
    made: set[str] = set()
    nested = [0]

    def rend(e: Expr, pr: Printer) -> str:
        if isinstance(e, Var):
            i = lay.pos[e.name]
            if e.name not in made:
                made.add(e.name)
                pr.lines.append(f"_w{i} = lax.broadcasted_iota(jnp.int32, {lay.shape(frozenset([e.name]))}, {i})")
            return f"_w{i}"
        if isinstance(e, IOp):
            return IOPS[e.op].format(pr(e.a), pr(e.b)).replace("tl.", "jnp.")
        if isinstance(e, Load):  # an index read from a tensor
            nested[0] += 1
            name = f"{tag}_g{nested[0]}"
            _gather(e, lay, e.buf.name, pr.lines, name)
            return name
        if isinstance(e, Const):
            return py_const(e.value, e.dtype)
        if isinstance(e, Op):
            return to_jax(render_op(e, [pr(a) for a in e.args]))
        raise UnsupportedKernel(f"{type(e).__name__} in an index")

    p = Printer(rend, prefix=f"{tag}_x")
    p.lines = lines
    idx = [p(x) if isinstance(x, Const) else f"({p(x)}).astype(jnp.int32)" for x in ld.index]
    flat = " + ".join(f"{x} * {s}" if s != 1 else x for x, s in zip(idx, ld.buf.strides())) or "0"
    if ld.mask is None:
        lines.append(f"{tag} = jnp.broadcast_to(jnp.take({src}, {flat}), {shape})")
    else:
        m = p(ld.mask)
        lines.append(f"{tag}_m = jnp.broadcast_to({m}, {shape})")
        at = f"jnp.where({tag}_m, jnp.broadcast_to({flat}, {shape}), 0)"
        lines.append(f"{tag} = jnp.where({tag}_m, jnp.take({src}, {at}), {py_const(ld.other, ld.buf.dtype)})")
    return fv


def _to_kernel_dt(val: str, dtype: str) -> str:
    return val if KERNEL_DT[dtype] == dtype else f"{val}.astype({jdt(KERNEL_DT[dtype])})"


class _TpuCtx(Ctx):
    """Expressions on whole blocks: loads are the operands' blocks, variables iotas, reductions keep
    their axis (extent 1)."""

    def __init__(self, lay: _Layout, operands: dict[Load, str], iotas: dict[str, str]) -> None:
        super().__init__({}, [])
        self.lay, self.operands, self.iotas = lay, operands, iotas

    def render(self, e: Expr, p: Printer) -> str:
        if isinstance(e, Var):
            return self.iotas[e.name]
        if isinstance(e, Load):
            v = self.operands[e]
            return f"({v} != 0)" if e.buf.dtype == "bool" else v
        if isinstance(e, IOp):
            return IOPS[e.op].format(p(e.a), p(e.b)).replace("tl.", "jnp.")
        if isinstance(e, Const):
            return py_const(e.value, e.dtype)
        if isinstance(e, Reduce) and id(e) in self.accs:
            return self.accs[id(e)]
        if isinstance(e, Reduce):
            return self.reduce(e, p)
        if isinstance(e, Scan):
            return self.scan(e, p)
        if isinstance(e, Op):
            code = to_jax(super().render(e, p))
            # a 64-bit op computes in 32 bits here (the wrapper widens an integer output)
            return code.replace("jnp.int64", "jnp.int32").replace("jnp.float64", "jnp.float32")
        raise UnsupportedKernel(type(e).__name__)

    def _full(self, body: str, e: Expr, names: set[str]) -> str:
        """`body` broadcast along the variables `names` it may not depend on."""
        have = free_vars(e, self.fv) & set(self.lay.pos)
        if set(names) <= have:
            return body
        return f"jnp.broadcast_to({body}, {self.lay.shape(have | names, blocked=True)})"

    def reduce(self, e: Reduce, p: Printer) -> str:
        axes = tuple(self.lay.pos[v.name] for v in e.axes)
        body = self._full(p(e.body), e.body, {v.name for v in e.axes})
        if e.op in ("argmax", "argmin"):
            best = "jnp.max" if e.op == "argmax" else "jnp.min"
            strides = [math.prod(v.extent for v in e.axes[i + 1:]) for i in range(len(e.axes))]
            flat = " + ".join(f"{self.iotas[v.name]} * {st}" for v, st in zip(e.axes, strides))
            n = math.prod(v.extent for v in e.axes)
            # the first (row-major) index holding the extreme value (Mosaic has no arg-reductions)
            return (f"jnp.min(jnp.where({body} == {best}({body}, axis={axes}, keepdims=True), {flat}, {n}), "
                    f"axis={axes}, keepdims=True)")
        if e.op == "prod":
            return f"_akg_prod({body}, {axes})"
        f = {"sum": "jnp.sum", "dot": "jnp.sum", "prod": "jnp.prod", "max": "jnp.max", "min": "jnp.min"}[e.op]
        return f"{f}({body}, axis={axes}, keepdims=True)"

    def scan(self, e: Scan, p: Printer) -> str:
        j = e.axis.name
        body = self._full(p(e.body), e.body, {j})
        at = p(e.at)
        keep = f"({self.iotas[j]} >= {at})" if e.reverse else f"({self.iotas[j]} <= {at})"
        if e.op == "sum":
            return f"jnp.sum(jnp.where({keep}, {body}, 0), axis={self.lay.pos[j]}, keepdims=True)"
        return f"_akg_prod(jnp.where({keep}, {body}, 1), ({self.lay.pos[j]},))"


def _vmem(target: HardwareModel) -> int:
    return int(target.chip("local_mem_per_unit_bytes"))


def default_schedule(k: Kernel, target: HardwareModel) -> Schedule:
    """The largest blocks whose double-buffered operands and temporaries fit a quarter of VMEM."""
    _check_types(k)
    budget = _vmem(target) // 4
    if _gemm(k) is not None:
        M, N, K = _gemm(k)[1:4]  # type: ignore[index]
        tm, tn, tk = (M if M <= 512 else 256), (N if N <= 512 else 256), (K if K <= 2048 else 512)
        return Schedule(layout="tpu", TM=tm, TN=tn, TK=tk)
    axes = _axes(k)
    rest = _widest_value(k, axes)
    per_row = 4 * rest * (2 * (len(_loads(k)) + 1) + 4)  # operands and output twice, temporaries
    e0 = axes[0].extent
    t0 = max(1, min(e0, budget // max(1, per_row)))
    if len(axes) == 2 and t0 < e0:  # the first axis is a block's second-to-last: a multiple of 8
        t0 = max(8, t0 // 8 * 8)
    if t0 * per_row > 2 * budget:
        raise UnsupportedKernel(f"one block row of {k.name} needs {per_row} B of VMEM, more than the "
                                f"{_vmem(target)} B the chip has (the TPU template keeps reduced axes whole)")
    return Schedule(layout="tpu", T0=t0)


def _widest_value(k: Kernel, axes: list[Var]) -> int:
    """Elements per block row of the largest array the kernel holds: a value's shape is its own variables'
    extents (1 elsewhere), so a reduction nested in another (a variance around a mean) holds its axes
    and the outer one's in turn, never both; the product of every axis (a group norm's 8 x 4096 x 4096,
    5 GB a row) was what the template never allocates. A kernel with a scan keeps that bound (its masked
    sums hold the scanned axis twice)."""
    first = axes[0].name
    if any(isinstance(e, Scan) for e in walk(k.expr)):
        return math.prod(v.extent for v in axes[1:])
    extent = {v.name: v.extent for v in axes}

    def size(names: set[str]) -> int:
        return math.prod(extent.get(n, 1) for n in names if n != first)

    coords = {v.name for v in k.coords} | {"_lane"}
    widest = size(coords)
    for e in walk(k.expr):
        if isinstance(e, Reduce):
            used = set(free_vars(e.body)) | {v.name for v in e.axes}  # a nested reduction binds its own
            widest = max(widest, size(used | coords))
    return widest


def _gemm(k: Kernel) -> tuple | None:
    """(parts, M, N, K, batch) when `k` is one contraction whose operands and epilogue read no
    coordinate as a value (the MXU template); None otherwise."""
    if k.kind != "matmul":
        return None
    try:
        g = split_gemm(k)
    except UnsupportedKernel:
        return None
    if _reads_coordinates(k.expr) or k.scans():
        return None
    M, N = math.prod(e for _, e in g.rows), math.prod(e for _, e in g.cols)
    if M < 8 and N < 8:  # no MXU tile to fill (a batch of dot products): the generic template's blocks
        return None
    return (g, M, N, g.k.extent, math.prod(e for _, e in g.batch))


def _reads_coordinates(e: Expr) -> bool:
    """Whether a variable is used as a value (not only inside a load's index)."""
    seen: set[int] = set()
    stack = [e]
    while stack:
        x = stack.pop()
        if id(x) in seen or isinstance(x, Load):
            continue
        if isinstance(x, Var):
            return True
        seen.add(id(x))
        stack.extend(children(x))
    return False


def render(k: Kernel, s: Schedule) -> str:
    _check_types(k)
    return _render_gemm(k, s) if "TM" in s else _render_generic(k, s)


def _operands(k: Kernel, lay: _Layout, srcs: dict[str, str], wrapper: list[str]) -> list[tuple[Load, frozenset[str]]]:
    out = []
    for i, ld in enumerate(_loads(k)):
        fv = _gather(ld, lay, srcs[ld.buf.name], wrapper)
        wrapper.append(f"_o{i} = " + _to_kernel_dt("_v", ld.buf.dtype))
        out.append((ld, fv))
    return out


def _iotas(lay: _Layout, names: list[str], offset0: str) -> list[str]:
    lines = []
    for n in names:
        i = lay.pos[n]
        shape = lay.shape(frozenset([n]), blocked=True)
        lines.append(f"_i{i} = lax.broadcasted_iota(jnp.int32, {shape}, {i})" + (f" + {offset0}" if i == 0 else ""))
    return lines


def _render_generic(k: Kernel, s: Schedule) -> str:
    axes = _axes(k)
    t0 = int(s["T0"])
    lay = _Layout(axes, t0)
    srcs = {b.name: b.name for b in k.inputs()}
    wrapper: list[str] = []
    ops = _operands(k, lay, srcs, wrapper)
    names = {ld: f"_l{i}" for i, (ld, _) in enumerate(ops)}
    ctx = _TpuCtx(lay, names, {v.name: f"_i{lay.pos[v.name]}" for v in axes})
    p = Printer(ctx.render, prefix="_t")
    val = p(k.expr)
    used = [v.name for v in axes if any(f"_i{lay.pos[v.name]}" in ln for ln in [*p.lines, val])]
    body = _iotas(lay, used, f"pl.program_id(0) * {t0}") + [f"_l{i} = r{i}[...]" for i in range(len(ops))] + p.lines
    out_names = frozenset(v.name for v in k.coords) or frozenset(["_unit"])
    oshape = lay.shape(out_names, blocked=True)
    body.append(f"o_ref[...] = jnp.broadcast_to({val}, {oshape}).astype({jdt(KERNEL_DT[k.out.dtype])})")
    grid = -(-axes[0].extent // t0)

    def spec(fv: frozenset[str]) -> str:
        shape = lay.shape(fv, blocked=True)
        first = "i" if axes[0].name in fv else "0"
        return f"pl.BlockSpec({shape}, lambda i: ({first},{' 0,' * (len(axes) - 1)}))"

    full = lay.shape(out_names)
    call = (f"pl.pallas_call(_body, out_shape=jax.ShapeDtypeStruct({full}, {jdt(KERNEL_DT[k.out.dtype])}), "
            f"grid=({grid},), in_specs=[{', '.join(spec(fv) for _, fv in ops)}], out_specs={spec(out_names)}, "
            f"interpret=interpret, compiler_params=_akg_tpu_params(('parallel',)))")
    return _function(k, body, wrapper, call, [f"_o{i}" for i in range(len(ops))], "_y")


def _function(k: Kernel, body: list[str], wrapper: list[str], call: str, args: list[str], result: str,
              tail: list[str] | None = None) -> str:
    refs = ", ".join([f"r{i}" for i in range(len(args))] + ["o_ref"] + (["acc_ref"] if "acc_ref" in "".join(body)
                                                                        else []))
    f64 = any(getattr(e, "dtype", "") == "f64" for e in walk(k.expr))
    note = " Its float64 steps compute in float32 (a TPU has no float64 unit)." if f64 else ""
    src = [f"def {k.name}({''.join(b.name + ', ' for b in k.inputs())}*, interpret):",
           f'    """{k.kind} kernel {k.name} for TPU: flat inputs in, {k.out.name} {list(k.out.shape)} out.{note}"""']
    src += ["    " + ln for ln in wrapper]
    src += [f"    def _body({refs}):"] + ["        " + ln for ln in body]
    src += [f"    {result} = {call}({', '.join(args)})"] + ["    " + ln for ln in tail or []]
    out_dt = k.out.dtype if k.out.dtype in ("f32", "bf16", "f16", "bool") else KERNEL_DT[k.out.dtype]
    src += [f"    return {result}.reshape({tuple(k.out.shape)}).astype({jdt(out_dt)})"]
    return "\n".join(src)


def _render_gemm(k: Kernel, s: Schedule) -> str:
    g, M, N, K, B = _gemm(k)  # type: ignore[misc]
    tm, tn, tk = int(s["TM"]), int(s["TN"]), int(s["TK"])
    groups = [("b", [n for n, _ in g.batch]), ("m", [n for n, _ in g.rows]), ("n", [n for n, _ in g.cols]),
              ("k", [g.k.name])]
    ext = {"b": B, "m": M, "n": N, "k": K}
    block = {"m": tm, "n": tn, "k": tk}
    index = {"b": "b", "m": "i", "n": "j", "k": "kk"}
    # the prologue of A reads (m, k), of B (n, k), the epilogue (m, n): a load's block keeps its side's
    # two dims (extent 1 where it does not read them) and squeezes the other two
    side_of = {ld: "mk" for ld in _loads_in(g.a)} | {ld: "nk" for ld in _loads_in(g.b)}
    lay = _Layout([Var(n, e) for n, e in (*g.batch, *g.rows, *g.cols, (g.k.name, K))])
    wrapper: list[str] = []
    specs, names = [], {}
    for i, ld in enumerate(_loads(k)):
        fv = _gather(ld, lay, ld.buf.name, wrapper)
        side = side_of.get(ld, "mn")
        has = {gname: bool(set(gn) & fv) for gname, gn in groups}
        whole = frozenset(n for gname, gn in groups if has[gname] for n in gn)
        dims = tuple(ext[gname] if has[gname] else 1 for gname, _ in groups)
        wrapper.append(f"_o{i} = " + _to_kernel_dt(f"jnp.broadcast_to(_v, {lay.shape(fv | whole)}).reshape({dims})",
                                                   ld.buf.dtype))
        bdims = [(str(block[gname]) if has[gname] else "1") if gname in side else "None" for gname, _ in groups]
        idx = [index[gname] if has[gname] else "0" for gname, _ in groups]
        specs.append(f"pl.BlockSpec(({', '.join(bdims)}), lambda b, i, j, kk: ({', '.join(idx)}))")
        names[ld] = f"_l{i}"
    nk = -(-K // tk)
    body = ["kk = pl.program_id(3)", "", "@pl.when(kk == 0)", "def _zero():",
            "    acc_ref[...] = jnp.zeros_like(acc_ref)", ""]
    body += [f"_l{i} = r{i}[...]" for i in range(len(names))]

    def value(e: Expr, prefix: str, accs: dict[int, str] | None = None) -> tuple[str, list[str]]:
        ctx = _TpuCtx(_Layout([Var("_r", 1), Var("_c", 1)]), names, {})
        ctx.accs.update(accs or {})
        pr = Printer(ctx.render, prefix=prefix)
        v = pr(e)
        return v, pr.lines

    a_v, a_lines = value(g.a, "_a")
    b_v, b_lines = value(g.b, "_b")
    body += a_lines + b_lines
    a_v, b_v = f"jnp.broadcast_to({a_v}, ({tm}, {tk}))", f"jnp.broadcast_to({b_v}, ({tn}, {tk}))"
    if K % tk:  # the last K block runs past K: its padding must add nothing
        body.append(f"_kv = lax.broadcasted_iota(jnp.int32, (1, {tk}), 1) + kk * {tk} < {K}")
        a_v, b_v = f"jnp.where(_kv, {a_v}, 0.0)", f"jnp.where(_kv, {b_v}, 0.0)"
    body.append(f"acc_ref[...] += lax.dot_general({a_v}.astype(jnp.float32), {b_v}.astype(jnp.float32), "
                "(((1,), (1,)), ((), ())), preferred_element_type=jnp.float32, precision=lax.Precision.HIGHEST)")
    val, e_lines = value(k.expr, "_e", {id(g.dot): "acc_ref[...]"})
    body += ["", f"@pl.when(kk == {nk - 1})", "def _out():"] + ["    " + ln for ln in e_lines]
    body.append(f"    o_ref[...] = jnp.broadcast_to({val}, ({tm}, {tn})).astype({jdt(KERNEL_DT[k.out.dtype])})")
    out_spec = f"pl.BlockSpec((None, {tm}, {tn}), lambda b, i, j, kk: (b, i, j))"
    grid = (B, -(-M // tm), -(-N // tn), nk)
    call = ("pl.pallas_call(_body, grid_spec=pltpu.PrefetchScalarGridSpec(num_scalar_prefetch=0, "
            f"grid={grid}, in_specs=[{', '.join(specs)}], out_specs={out_spec}, "
            f"scratch_shapes=[pltpu.VMEM(({tm}, {tn}), jnp.float32)]), "
            f"out_shape=jax.ShapeDtypeStruct(({B}, {M}, {N}), {jdt(KERNEL_DT[k.out.dtype])}), interpret=interpret, "
            "compiler_params=_akg_tpu_params(('parallel', 'parallel', 'parallel', 'arbitrary')))")
    # (batch, rows, cols) back to the output's coordinate order
    order = [n for n, _ in (*g.batch, *g.rows, *g.cols)]
    perm = tuple(order.index(v.name) for v in k.coords)
    tail = [f"_y = _y.reshape({tuple(e for _, e in (*g.batch, *g.rows, *g.cols))})"]
    if perm != tuple(range(len(perm))):
        tail.append(f"_y = _y.transpose({perm})")
    return _function(k, body, wrapper, call, [f"_o{i}" for i in range(len(names))], "_y", tail)


def _loads_in(e: Expr) -> list[Load]:
    return [x for x in walk(e) if isinstance(x, Load)]


def space(k: Kernel, target: HardwareModel) -> list[Schedule]:
    """The default blocks and smaller ones (halved along each blocked axis)."""
    s = default_schedule(k, target)
    if "TM" in s:
        out = [s] + [s.replace(**{n: s[n] // 2}) for n, q in (("TM", 8), ("TN", 128), ("TK", 128))
                     if s[n] // 2 >= q and s[n] % (2 * q) == 0]
    else:
        out = [s] + [s.replace(T0=t) for t in (s["T0"] // 2, s["T0"] // 4) if t >= 8 and t % 8 == 0]
    return out


IMPORTS = ["from jax import lax  # noqa: E402", "from jax.experimental.pallas import tpu as pltpu  # noqa: E402"]
RUNTIME = '''
_AKG_ON_TPU = _akg_jax_devices()[0].platform == "tpu"
_AKG_LOWERED = {}  # kernel name and operand types -> checked
if not _AKG_ON_TPU:  # lowered here for the target chip: Mosaic asks the device it runs on for the chip's
    # tiling (a 1-D block), and this host is no TPU: the target chip's entry from JAX's own table
    from jax._src.pallas.mosaic import tpu_info as _akg_tpu_info  # noqa: E402
    _akg_tpu_info.registry.setdefault(_akg_jax_devices()[0].device_kind, lambda: _akg_tpu_info._get_tpu_info_impl(
        _akg_tpu_info.ChipVersion(_AKG_TPU_CHIP[0]), _AKG_TPU_CHIP[1]))


def _akg_prod(x, axes):
    """A product along `axes` (Mosaic has no product reduction): the sum of logarithms of magnitudes,
    exact zeros and the sign counted apart; NaN propagates."""
    x = x.astype(jnp.float32)
    mag = jnp.exp(jnp.sum(jnp.log(jnp.abs(x)), axis=axes, keepdims=True))
    neg = jnp.sum((x < 0).astype(jnp.int32), axis=axes, keepdims=True)
    zero = jnp.max((x == 0).astype(jnp.int32), axis=axes, keepdims=True) > 0
    return jnp.where(zero, 0.0, jnp.where(neg % 2 == 1, -mag, mag))


def _akg_tpu_params(semantics):
    return pltpu.CompilerParams(dimension_semantics=semantics, vmem_limit_bytes=_AKG_VMEM_LIMIT)


@functools.cache
def _akg_tpu_fn(fn, types):
    """`fn` jitted for this host: native on a TPU; elsewhere lowered for the TPU once (Mosaic's
    verdict: a block that breaks the (8, 128) rule or an op Mosaic lacks is an error naming it), then
    run in TPU interpret mode."""
    if not _AKG_ON_TPU:
        specs = [jax.ShapeDtypeStruct(s, d) for s, d in types]
        try:
            jax.export.export(jax.jit(functools.partial(fn, interpret=False)), platforms=["tpu"])(*specs)
        except Exception as e:  # noqa: BLE001 - any lowering failure rejects the kernel
            first = (str(e).strip().splitlines() or [type(e).__name__])[0]
            raise RuntimeError(f"Pallas TPU lowering failed for kernel {fn.__name__}: {first[:400]}") from None
    return jax.jit(functools.partial(fn, interpret=False if _AKG_ON_TPU else pltpu.InterpretParams()))


def _akg_tpu_launch(fn, out, args):
    """Runs the TPU kernel `fn` on flat views of `args`; its output shaped and typed like `out`."""
    # 32-bit JAX (a TPU kernel has no 64-bit types): 64-bit indices are narrowed here, widened after
    with _akg_on(out):
        xs = [jax.dlpack.from_dlpack(a.detach().reshape(-1).to(torch.int32 if a.dtype == torch.int64 else a.dtype)
                                     .contiguous()) for a in args]
    if _AKG_ON_TPU:
        xs = [jax.device_put(x, jax.devices()[0]) for x in xs]
    y = _akg_tpu_fn(fn, tuple((x.shape, x.dtype) for x in xs))(*xs)
    y = jax.device_put(y, jax.devices("cpu")[0])
    return torch.from_dlpack(y).reshape(out.shape).to(out.dtype)
'''


def launch(k: Kernel, s: Schedule, ref: Ref) -> list[str]:
    args = "(" + "".join(f"{ref(b)}, " for b in k.inputs()) + ")"
    o = k.out.name
    return [f"{o} = _akg_tpu_launch({k.name}, {o}, {args})"]
