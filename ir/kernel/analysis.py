"""Kernel-IR analyses the core and every backend share: a GEMM's parts and dimensions (the launch
grid of every GEMM template follows from them), an attention kernel's parts (ir.kernel.flash), and a
row-fused kernel's row and column coordinates."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import UnsupportedKernel
from .ir import Const, Expr, IOp, Kernel, Load, Op, Reduce, Scan, Var, children, free_vars, size_args, walk

# The widest query/value head an attention template takes (FlashAttention's bound too): its query tile
# and output accumulator stay in registers / local memory for the whole sweep over the keys.
MAX_HEAD = 256


@dataclass(frozen=True)
class GemmParts:
    """A matmul kernel taken apart: its one dot reduction, the A and B element expressions, the K axis, and
    the output coordinates that index A only (rows), B only (cols) or both (batch)."""

    dot: Reduce
    a: Expr
    b: Expr
    k: Var
    rows: list[tuple[str, int]]
    cols: list[tuple[str, int]]
    batch: list[tuple[str, int]]


def split_gemm(k: Kernel) -> GemmParts:
    """Raises UnsupportedKernel unless `k` holds exactly one reduction, a dot."""
    dots = [r for r in k.reductions() if r.op == "dot"]
    if len(dots) != 1 or len(k.reductions()) != 1:
        raise UnsupportedKernel("not a single GEMM")
    dot = dots[0]
    a_e, b_e = dot.body.args  # type: ignore[attr-defined]
    kv = dot.axes[0]
    a_vars, b_vars = free_vars(a_e) - {kv.name}, free_vars(b_e) - {kv.name}
    coords = [(v.name, v.extent) for v in k.coords]
    cols = [c for c in coords if c[0] in b_vars and c[0] not in a_vars]
    batch = [c for c in coords if c[0] in a_vars and c[0] in b_vars]
    rows = [c for c in coords if c not in cols and c not in batch]
    return GemmParts(dot, a_e, b_e, kv, rows, cols, batch)


def gemm_dims(k: Kernel) -> tuple[int, int, int, int]:
    """(M, N, K, batch) of a matmul kernel as `split_gemm` takes it apart."""
    g = split_gemm(k)
    return (math.prod(e for _, e in g.rows), math.prod(e for _, e in g.cols), g.k.extent,
            math.prod(e for _, e in g.batch))


@dataclass(frozen=True)
class AttnParts:
    """An attention kernel taken apart. `score` is S at (rows, j) with the Q.K^T contraction `qk` inside
    it; `q` reads (rows, e), `k` reads (j, e), `v` reads (j, cols); batch coordinates index all three."""

    out: Reduce  # the P @ V contraction over j (the kernel's value is it, or an epilogue of it)
    score: Expr
    qk: Reduce
    q: Expr
    k: Expr
    v: Expr
    j: Var
    e: Var
    rows: list[tuple[str, int]]
    cols: list[tuple[str, int]]
    batch: list[tuple[str, int]]
    key_limit: int | None = None  # the score is -inf wherever j > i + key_limit (causal): later keys are skipped
    guarded: bool = False  # P is 0 on a query whose every score is -inf (its value 0, not 0 / 0)


def _key_limit(score: Expr, j: Var, rows: list[tuple[str, int]]) -> int | None:
    """c where the score is where(j - i <= c, x, -inf) (a boolean where(cond, True, False) around the
    condition allowed, and a widening cast around it: a bf16 model's scores widened for the softmax), i the
    one query-row coordinate; None otherwise."""
    while isinstance(score, Op) and score.op == "cast" and score.dtype == "f32":
        score = score.args[0]
    if len(rows) != 1 or not (isinstance(score, Op) and score.op == "where" and isinstance(score.args[2], Const)
                              and score.args[2].value == float("-inf")):
        return None
    cond = score.args[0]
    if isinstance(cond, Op) and cond.op == "where" and [getattr(a, "value", None) for a in cond.args[1:]] == [True,
                                                                                                           False]:
        cond = cond.args[0]
    if isinstance(cond, IOp) and cond.op == "<=" and isinstance(cond.b, Const) and isinstance(cond.a, IOp) \
            and cond.a.op == "-" and cond.a.a == j and isinstance(cond.a.b, Var) and cond.a.b.name == rows[0][0]:
        return int(cond.b.value)
    return None


def same_renamed(x: Expr, y: Expr, ren: dict[str, str]) -> bool:
    """Equal up to renaming the variables in `ren` (y's name -> x's): a score recomputed inside the
    row maximum and the row sum at fresh coordinates is the score."""
    if type(x) is not type(y):
        return False
    if isinstance(x, Var):
        return x.extent == y.extent and ren.get(y.name, y.name) == x.name  # type: ignore[attr-defined]
    if isinstance(x, Const):
        return x == y
    if isinstance(x, Load):
        assert isinstance(y, Load)
        return (x.buf == y.buf and x.other == y.other and len(x.index) == len(y.index)
                and all(same_renamed(a, b, ren) for a, b in zip(x.index, y.index))
                and (x.mask is None) == (y.mask is None) and (x.mask is None or same_renamed(x.mask, y.mask, ren)))
    if isinstance(x, Op):
        assert isinstance(y, Op)
        return (x.op, x.attrs, x.dtype, len(x.args)) == (y.op, y.attrs, y.dtype, len(y.args)) and all(
            same_renamed(a, b, ren) for a, b in zip(x.args, y.args))
    if isinstance(x, IOp):
        assert isinstance(y, IOp)
        return x.op == y.op and same_renamed(x.a, y.a, ren) and same_renamed(x.b, y.b, ren)
    if isinstance(x, Reduce):
        assert isinstance(y, Reduce)
        if (x.op, x.dtype, len(x.axes)) != (y.op, y.dtype, len(y.axes)):
            return False
        inner = dict(ren, **{b.name: a.name for a, b in zip(x.axes, y.axes) if a.extent == b.extent})
        return len(inner) - len(ren) == len(x.axes) and same_renamed(x.body, y.body, inner)
    return False  # scans do not occur in attention


def online_max(s: Reduce) -> Reduce | None:
    """The row maximum M where `s` is sum(exp(E - M)) over the same extents, E being M's own body at
    s's coordinates (softmax's, log-softmax's and logsumexp's denominator): one sweep can compute both,
    rescaling the running sum each time the running maximum grows, so the row is read once for both."""
    b = s.body
    if s.op != "sum" or not (isinstance(b, Op) and b.op == "exp" and isinstance(b.args[0], Op)
                             and b.args[0].op == "sub"):
        return None
    e, m = b.args[0].args
    if not (isinstance(m, Reduce) and m.op == "max" and m.dtype == s.dtype == "f32"
            and [v.extent for v in m.axes] == [v.extent for v in s.axes]):
        return None
    ren = {y.name: x.name for x, y in zip(m.axes, s.axes)}
    return m if same_renamed(m.body, e, ren) else None


def online_pairs(reds: list[Reduce]) -> list[tuple[Reduce, Reduce]]:
    """(maximum, sum) pairs among a row kernel's reductions that one sweep can compute (`online_max`),
    the maximum being the very node the sum's body reads."""
    return [(m, s) for s in reds if (m := online_max(s)) is not None and any(m is x for x in reds)]


def split_attention(k: Kernel) -> AttnParts:
    """Raises UnsupportedKernel unless `k` is the attention expression of the module docstring, or a
    pointwise epilogue of it."""
    if size_args(k):
        raise UnsupportedKernel("not attention: run-time sizes (the template takes fixed ones)")
    reds = [r for r in walk(k.expr) if isinstance(r, Reduce)]
    inner = {id(x) for r in reds for x in walk(r.body) if isinstance(x, Reduce)}
    tops = [r for r in reds if id(r) not in inner]  # an epilogue may follow (a residual add)
    out = tops[0] if len(tops) == 1 else None
    if not (isinstance(out, Reduce) and out.op == "dot" and len(out.axes) == 1 and isinstance(out.body, Op)
            and out.body.op == "mul" and len(out.body.args) == 2):
        raise UnsupportedKernel("not attention: the output is not one P @ V contraction")
    j = out.axes[0]
    p, v = out.body.args
    p, rounded = _unround(p, v)
    guard = _dead_guard(p)
    if guard is not None:  # torch's masked-row guard sits outside the rounding of P or inside it
        p = p.args[2]  # type: ignore[attr-defined]
        if not rounded:
            p, _ = _unround(p, v)
    if not (isinstance(p, Op) and p.op == "div" and isinstance(p.args[1], Reduce) and p.args[1].op == "sum"):
        raise UnsupportedKernel("not attention: P is not exp(S - M) / L")
    num, lsum = p.args
    if not (isinstance(num, Op) and num.op == "exp" and isinstance(num.args[0], Op) and num.args[0].op == "sub"):
        raise UnsupportedKernel("not attention: P's numerator is not exp(S - M)")
    score, mx = num.args[0].args
    if not (isinstance(mx, Reduce) and mx.op == "max" and len(mx.axes) == 1 and len(lsum.axes) == 1):
        raise UnsupportedKernel("not attention: M is not a row maximum")
    # M and L recompute S and exp(S - M) at their own axis; both must be exactly those
    if not same_renamed(score, mx.body, {mx.axes[0].name: j.name}) or \
            not same_renamed(num, lsum.body, {lsum.axes[0].name: j.name}):
        raise UnsupportedKernel("not attention: the row maximum or sum is not over the scores")
    if guard is not None and not _guards(score, guard, j):
        raise UnsupportedKernel("not attention: the masked-row guard is not over the scores")
    dots = [r for r in walk(score) if isinstance(r, Reduce)]
    if len(dots) != 1 or dots[0].op != "dot" or len(dots[0].axes) != 1 or not isinstance(dots[0].body, Op) \
            or dots[0].body.op != "mul":
        raise UnsupportedKernel("not attention: the scores hold other than one Q.K^T contraction")
    if any(isinstance(x, Scan) for x in walk(k.expr)) or any(isinstance(r, Reduce) and r.op == "dot"
                                                             for r in walk(v)):
        raise UnsupportedKernel("not attention: V is not loaded")
    qk = dots[0]
    e = qk.axes[0]
    a, b = qk.body.args  # type: ignore[attr-defined]
    names = {c.name for c in k.coords}
    p_vars, v_vars = (free_vars(score) - {j.name}) & names, (free_vars(v) - {j.name}) & names
    q_side, k_side = (a, b) if j.name not in free_vars(a) else (b, a)
    if j.name in free_vars(q_side) or not free_vars(k_side) - {e.name} <= (names | {j.name}):
        raise UnsupportedKernel("not attention: Q depends on the key axis")
    coords = [(c.name, c.extent) for c in k.coords]
    batch = [c for c in coords if c[0] in p_vars and c[0] in v_vars]
    rows = [c for c in coords if c[0] in p_vars and c[0] not in v_vars]
    cols = [c for c in coords if c[0] in v_vars and c[0] not in p_vars]
    if len(batch) + len(rows) + len(cols) != len(coords) or not rows or not cols:
        raise UnsupportedKernel("not attention: an output coordinate indexes neither P nor V")
    if (free_vars(k_side) - {e.name, j.name}) & {n for n, _ in rows} or free_vars(v) & {n for n, _ in rows}:
        raise UnsupportedKernel("not attention: K or V depends on the query rows")
    width = max(e.extent, math.prod(x for _, x in cols))
    if width > MAX_HEAD:
        raise UnsupportedKernel(f"not template-sized attention: head width {width} > {MAX_HEAD} (a query tile and "
                                "its output accumulator must stay on chip)")
    return AttnParts(out, score, qk, q_side, k_side, v, j, e, rows, cols, batch, _key_limit(score, j, rows),
                     guard is not None)


def _unround(p: Expr, v: Expr) -> tuple[Expr, bool]:
    """(P, True) where `p` is P rounded to V's 16-bit type for the second GEMM (torch's fp32 softmax, then
    .to(v.dtype)): the template rounds its unnormalised tile to that type before the same GEMM, dividing by
    L after. (p, False) otherwise."""
    if isinstance(p, Op) and p.op == "cast" and p.dtype in ("f16", "bf16") and p.dtype == v.dtype:
        return p.args[0], True
    return p, False


def _guards(score: Expr, guard: Reduce, j: Var) -> bool:
    """The masked-row guard's maximum is over the scores: the very scores, or the 16-bit scores before the
    softmax widens them to fp32 (torch's bf16 attention under an added mask); a widening cast is exact and
    keeps the order, so either maximum is -inf on the same rows."""
    ren = {guard.axes[0].name: j.name}
    if same_renamed(score, guard.body, ren):
        return True
    return (isinstance(score, Op) and score.op == "cast" and score.dtype == "f32"
            and same_renamed(score.args[0], guard.body, ren))


def _dead_guard(p: Expr) -> Reduce | None:
    """M' where P is where(M' == -inf, 0, P0) (torch's attention: a query whose every key is masked
    answers 0); None otherwise."""
    if not (isinstance(p, Op) and p.op == "where" and isinstance(p.args[1], Const) and p.args[1].value == 0.0):
        return None
    cond = p.args[0]
    if not (isinstance(cond, Op) and cond.op == "eq" and isinstance(cond.args[1], Const)
            and cond.args[1].value == float("-inf") and isinstance(cond.args[0], Reduce)
            and cond.args[0].op == "max" and len(cond.args[0].axes) == 1):
        return None
    return cond.args[0]


def row_split(k: Kernel) -> tuple[tuple[Var, ...], tuple[Var, ...]] | None:
    """(row coordinates, column coordinates) of a kernel whose every reduction depends on output
    coordinates alone: the row coordinates are those some reduction reads. None otherwise."""
    reds = k.reductions()
    if not reds or any(r.op in ("dot", "argmax", "argmin") for r in reds):
        return None
    names = {v.name for v in k.coords}
    memo: dict[int, frozenset[str]] = {}
    used: set[str] = set()
    for r in reds:
        fv = free_vars(r, memo)
        if not fv <= names:
            return None
        used |= fv
    return tuple(v for v in k.coords if v.name in used), tuple(v for v in k.coords if v.name not in used)


def _cost(e: Expr, seen: set[int]) -> int:
    """Operations to evaluate `e` once: loads and ops count one; a reduction repeats its body over its
    extent, except inner reductions that do not read its axes (templates compute those once). A node
    in `seen` is already computed (templates name shared values)."""
    if id(e) in seen:
        return 0
    seen.add(id(e))
    if isinstance(e, Reduce):
        mine = {v.name for v in e.axes}
        hoisted = [r for r in walk(e.body) if isinstance(r, Reduce) and r is not e and not free_vars(r) & mine]
        outside = sum(_cost(r, seen) for r in hoisted)
        return outside + math.prod(v.extent for v in e.axes) * (_cost(e.body, set(seen)) + 1)
    return 1 + sum(_cost(c, seen) for c in children(e) if not isinstance(c, (Var, Const)))


def work(k: Kernel) -> int:
    """Operations a kernel performs as the templates run it: every output element evaluates the
    expression, except that a row-fused kernel computes its reductions once per row."""
    if k.kind == "attention":  # per query row: each key's score, its exponent and its share of the output
        a = split_attention(k)
        d = math.prod(e for _, e in a.cols)
        per_key = _cost(a.score, set()) + 6 + 2 * d
        return k.out.numel // d * a.j.extent * per_key + k.out.numel * _cost(k.expr, {id(a.out)})
    if k.kind == "rownorm" and (rs := row_split(k)) is not None:
        rows = math.prod(v.extent for v in rs[0])
        reds = k.reductions()
        nested = {id(x) for o in reds for x in walk(o.body) if isinstance(x, Reduce) and x is not o}
        seen: set[int] = set()
        per_row = sum(_cost(r, seen) for r in reds if id(r) not in nested)  # outermost: each costs its nest
        return rows * per_row + k.out.numel * _cost(k.expr, {id(r) for r in reds})
    return k.out.numel * _cost(k.expr, set())
