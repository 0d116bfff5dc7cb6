"""Lowering graph-IR fusion groups to kernel IR.

Each group becomes one kernel per value that must live in memory (group outputs and the operands
of library calls). Inside a kernel every other value of the group is an expression over the
output coordinates: movement ops become index arithmetic, reductions `Reduce` nodes over fresh
variables, a contraction a `dot` reduction. Ops without a generated kernel yet (convolutions,
windows, scans, random and opaque ops) become declared `LibraryCall`s unless the backend generates them
(implicit.py).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from ..graph import Graph, Node
from ..ops import opdef
from ..passes.fusion import FusionPlan, Group, fuse
from ..passes.library import LIBRARY_MARK
from ..sym import is_dynamic
from .analysis import row_split
from .build import I64, ic, iop, land, op, where
from .implicit import GENERATED
from .ir import (
    Buf,
    Const,
    Expr,
    Kernel,
    KernelProgram,
    LibraryCall,
    Load,
    Reduce,
    Scan,
    Var,
    row_major_strides,
    walk,
)
from .share import share_reductions
from .unroll import WINDOW_MAX

LIBRARY_OPS = ("conv", "conv_transpose", "conv_weight_grad", "max_pool", "max_pool_indices", "avg_pool",
               "adaptive_avg_pool", "adaptive_max_pool", "cumsum", "cumprod", "opaque", "random")
SCAN_OPS = ("cumsum", "cumprod")
CONCAT_PIECES = 16  # a concatenation of more pieces is torch's copy per piece, not one kernel selecting
REDUCE_OPS = {"sum": "sum", "mean": "sum", "amax": "max", "amin": "min", "prod": "prod"}


class LoweringError(ValueError):
    pass


def conv_kinds(kinds: set[str] | tuple[str, ...]) -> set[str]:
    """The convolutions a backend with these manifest kinds generates when asked: ungrouped ones where it
    has implicit GEMMs ("conv"), depthwise ones where it has windows ("dwconv")."""
    return ({"conv"} & set(kinds)) | ({"dwconv"} if "window" in kinds else set())


def generated_conv(groups: int, x_shape: tuple[int, ...], w_shape: tuple[int, ...],
                   generated: frozenset[str] | set[str]) -> bool:
    """Whether a convolution is generated: an ungrouped one as an implicit GEMM ("conv"), a depthwise
    one whose window is small as a window ("dwconv": its reduction unrolls into a pointwise kernel)."""
    if "conv" in generated and groups == 1:
        return True
    depthwise = len(x_shape) > 2 and len(w_shape) > 2 and groups == x_shape[1] and w_shape[1] == 1
    return "dwconv" in generated and depthwise and math.prod(w_shape[2:]) <= WINDOW_MAX


def needs_library(n: Node, generated: frozenset[str] = frozenset()) -> bool:
    """Whether `n` stays a torch call. `generated` names library ops the backend generates instead:
    "conv" (an ungrouped convolution or transposed convolution as an implicit GEMM), "dwconv" (a depthwise
    one with a small window), "window" (max and average pooling, a max pool's positions), "scan"
    (cumulative sums and products).
    A node the `library` pass marked stays a torch call regardless."""
    if n.meta.get(LIBRARY_MARK) or n.attrs.get("channels_last"):  # channels last: oneDNN's layout
        return True
    if n.op == "conv" and generated_conv(n.attrs["groups"], n.args[0].shape if n.args[0] else (),
                                         n.args[1].shape if n.args[1] else (), generated):
        return False
    if n.op == "conv_transpose" and "conv" in generated and n.attrs["groups"] == 1:  # a gathering implicit GEMM
        return False
    if n.op in ("max_pool", "max_pool_indices", "avg_pool") and "window" in generated:
        return False
    if n.op in SCAN_OPS and "scan" in generated:
        return False
    if n.op == "concat" and len(n.args) > CONCAT_PIECES:  # each element would select among them all
        return True
    return n.op in LIBRARY_OPS or (n.op == "dropout" and n.attrs["training"] and n.attrs["p"] > 0) or \
        opdef(n.op).group == "composite"


class _Lowerer:
    def __init__(self, g: Graph, generated: frozenset[str] = frozenset()) -> None:
        self.g = g
        self.generated = generated
        self.bufs: dict[int, Buf] = {}
        self.consts: dict[str, object] = {}
        self._ids = itertools.count()
        outs = {id(o) for o in g.outputs}
        for n in g.nodes:
            if n.op == "input":
                self.bufs[id(n)] = Buf(n.name, n.shape, n.dtype, "input")
            elif n.op == "param":
                self.bufs[id(n)] = Buf(n.name, n.shape, n.dtype, "param", n.attrs["key"])
        self.out_ids = outs
        self.memo: dict[tuple[object, ...], Expr] = {}  # per kernel: (node, coordinates, mask) -> value

    def buf(self, n: Node) -> Buf:
        if id(n) not in self.bufs:
            self.bufs[id(n)] = Buf(n.name, n.shape, n.dtype, "output" if id(n) in self.out_ids else "tmp")
        return self.bufs[id(n)]

    def fresh(self, extent: int, hint: str) -> Var:
        return Var(f"{hint}{next(self._ids)}", extent)

    # --- values as expressions over coordinates
    def expr(self, n: Node, c: Sequence[Expr], mask: Expr | None, inline: set[int]) -> Expr:
        """A value recomputed at the same coordinates is one shared sub-expression (one reduction, not
        two, when a row-fused kernel uses a row's maximum twice)."""
        key = (id(n), tuple(c), mask)
        try:
            return self.memo[key]
        except KeyError:
            val = self.memo[key] = self._expr(n, c, mask, inline)
            return val
        except TypeError:  # an index expression with unhashable attributes: no sharing
            return self._expr(n, c, mask, inline)

    def _expr(self, n: Node, c: Sequence[Expr], mask: Expr | None, inline: set[int]) -> Expr:
        if n.op in ("scalar", "full"):  # constants are materialised inside kernels
            v = n.attrs["value"]
            return _count(v, n.dtype) if is_dynamic(v) and n.dtype != I64 else Const(v, n.dtype)
        if n.op == "arange":
            a = n.attrs
            ramp = iop("+", ic(a["start"]), iop("*", c[0], ic(a["step"])))
            return ramp if n.dtype == I64 else op("cast", [ramp], n.dtype, dtype=n.dtype)
        if id(n) not in inline:
            return Load(self.buf(n), tuple(c), mask, 0.0)
        d = opdef(n.op)
        a = n.args
        if d.group in ("unary", "binary", "ternary") or n.op == "dropout":
            if n.op == "dropout":  # eval mode or p = 0 (training with p > 0 is a library call)
                return self.expr(a[0], c, mask, inline)  # type: ignore[arg-type]
            args = [self.expr(x, _broadcast(x.shape, n.shape, c), mask, inline) for x in a]  # type: ignore[union-attr]
            return op(n.op, args, n.dtype, **n.attrs)
        if d.group == "movement":
            return self.movement(n, c, mask, inline)
        if d.group == "reduction":
            return self.reduction(n, c, mask, inline)
        if d.group == "contraction" and n.op in ("matmul", "linear"):
            return self.contraction(n, c, mask, inline)
        if n.op in GENERATED and not needs_library(n, self.generated):
            return GENERATED[n.op](self, n, c, mask, inline)
        raise LoweringError(f"no kernel-IR lowering for {n.op} (%{n.name})")

    def movement(self, n: Node, c: Sequence[Expr], mask: Expr | None, inline: set[int]) -> Expr:
        x = n.args[0]
        assert x is not None
        at = n.attrs
        sub = lambda idx, m=mask: self.expr(x, idx, m, inline)  # noqa: E731
        if n.op == "reshape":
            split = _reshape_chunks(x.shape, n.shape)
            if split is not None:
                return sub(_chunked_index(x.shape, n.shape, split, c))
            flat = ic(0)
            for ci, st in zip(c, row_major_strides(n.shape)):
                flat = iop("+", flat, iop("*", ci, ic(st)))
            return sub([iop("%", iop("//", flat, ic(st)), ic(sz)) if sz != 1 else ic(0)
                        for st, sz in zip(row_major_strides(x.shape), x.shape)])
        if n.op == "permute":
            idx: list[Expr] = [ic(0)] * len(c)
            for i, dim in enumerate(at["dims"]):
                idx[dim] = c[i]
            return sub(idx)
        if n.op == "expand":
            return sub(_broadcast(x.shape, n.shape, c))
        if n.op == "slice":
            idx = list(c)
            idx[at["dim"]] = iop("+", ic(at["start"]), iop("*", c[at["dim"]], ic(at["step"])))
            return sub(idx)
        if n.op == "flip":
            idx = list(c)
            for dim in at["dims"]:
                idx[dim] = iop("-", ic(x.shape[dim] - 1), c[dim])
            return sub(idx)
        if n.op == "roll":
            return self.roll(x, list(zip(at["shifts"], at["dims"])), list(c), mask, inline, n.dtype)
        if n.op == "unfold":  # out[..., i, ..., j] = x[..., i * step + j, ...]
            idx = list(c[:-1])
            idx[at["dim"]] = iop("+", iop("*", c[at["dim"]], ic(at["step"])), c[-1])
            return sub(idx)
        if n.op == "repeat":
            off = len(n.shape) - len(x.shape)
            return sub([iop("%", c[off + i], ic(s)) for i, s in enumerate(x.shape)])
        if n.op == "pad":
            return self.pad(n, x, c, mask, inline)
        if n.op == "concat":
            parts = [p for p in n.args if p is not None]
            dim, start = at["dim"], 0
            result: Expr | None = None
            pieces = []
            for p in parts:
                lo, hi = start, start + p.shape[dim]
                inside = land(iop(">=", c[dim], ic(lo)), iop("<", c[dim], ic(hi)))
                idx = list(c)
                idx[dim] = iop("-", c[dim], ic(lo))
                pieces.append((inside, self.expr(p, idx, land(mask, inside), inline)))
                start = hi
            if len(pieces) <= 4:
                result = pieces[-1][1]
                for inside, val in reversed(pieces[:-1]):
                    result = where(inside, val, result, n.dtype)
                return result
            # many pieces (a recurrence's outputs stacked): a balanced tree of selects, log-deep, not a chain
            # as deep as the pieces are many (which no recursive pass over the expression survives)
            starts = list(itertools.accumulate([p.shape[dim] for p in parts], initial=0))

            def tree(lo: int, hi: int) -> Expr:
                if hi - lo == 1:
                    return pieces[lo][1]
                mid = (lo + hi) // 2
                return where(iop("<", c[dim], ic(starts[mid])), tree(lo, mid), tree(mid, hi), n.dtype)
            return tree(0, len(pieces))
        if n.op in ("tril", "triu"):
            diff = iop("-", c[-1], c[-2])
            keep = iop("<=", diff, ic(at["diagonal"])) if n.op == "tril" else iop(">=", diff, ic(at["diagonal"]))
            return where(keep, sub(list(c)), Const(0, n.dtype), n.dtype)
        if n.op == "diag":
            k = at["diagonal"]
            if x.type.rank == 1:
                i, j = c
                on = iop("==", iop("-", j, i), ic(k))
                pos = i if k >= 0 else j
                return where(on, self.expr(x, [pos], land(mask, on), inline), Const(0, n.dtype), n.dtype)
            (i,) = c
            return sub([i, iop("+", i, ic(k))] if k >= 0 else [iop("-", i, ic(k)), i])
        if n.op in ("gather", "index_select"):
            idx_node = n.args[1]
            assert idx_node is not None
            dim = at["dim"]
            idx = list(c)
            pos = self.expr(idx_node, list(c) if n.op == "gather" else [c[dim]], mask, inline)
            idx[dim] = pos
            # an index outside the tensor (a token id past the vocabulary) is never read: it answers NaN where
            # torch raises, so the verifier and the caller see it, and no kernel loads outside its buffer
            ok = land(iop(">=", pos, ic(0)), iop("<", pos, ic(x.shape[dim])))
            assert ok is not None
            if n.dtype not in ("f16", "bf16", "f32", "f64"):
                return sub(idx, land(mask, ok))
            return where(ok, sub(idx, land(mask, ok)), Const(float("nan"), n.dtype), n.dtype)
        raise LoweringError(f"no kernel-IR lowering for {n.op}")

    def roll(self, x: Node, rolls: list[tuple[int, int]], c: list[Expr], mask: Expr | None, inline: set[int],
             dtype: str) -> Expr:
        """out[i] = x[(i - s) mod n] along each rolled dim, as two masked pieces (i >= s reads i - s, the
        rest i - s + n) rather than a remainder: TileLang's simplifier drops a shift added to a
        coordinate that is itself a remainder."""
        if not rolls:
            return self.expr(x, c, mask, inline)
        (shift, dim), rest = rolls[0], rolls[1:]
        ext = x.shape[dim]
        s = shift % ext
        if s == 0:
            return self.roll(x, rest, c, mask, inline, dtype)
        high = iop(">=", c[dim], ic(s))
        low = iop("<", c[dim], ic(s))
        a = list(c)
        a[dim] = iop("-", c[dim], ic(s))
        b = list(c)
        b[dim] = iop("+", c[dim], ic(ext - s))
        return where(high, self.roll(x, rest, a, land(mask, high), inline, dtype),
                     self.roll(x, rest, b, land(mask, low), inline, dtype), dtype)

    def pad(self, n: Node, x: Node, c: Sequence[Expr], mask: Expr | None, inline: set[int]) -> Expr:
        pads = list(n.attrs["pads"])
        mode = n.attrs["mode"]
        idx, valid = list(c), None
        for k in range(len(pads) // 2):
            dim = x.type.rank - 1 - k
            lo, size = pads[2 * k], x.shape[dim]
            i = iop("-", c[dim], ic(lo))
            if mode == "constant":
                valid = land(valid, land(iop(">=", i, ic(0)), iop("<", i, ic(size))))
                idx[dim] = i
            elif mode == "reflect":
                a = iop("max", i, iop("-", ic(0), i))
                idx[dim] = iop("-", ic(size - 1), _iabs(iop("-", ic(size - 1), a)))
            elif mode == "replicate":
                idx[dim] = iop("min", iop("max", i, ic(0)), ic(size - 1))
            elif mode == "circular":
                idx[dim] = iop("%", iop("+", iop("%", i, ic(size)), ic(size)), ic(size))
            else:
                raise LoweringError(f"pad mode {mode!r}")
        val = self.expr(x, idx, land(mask, valid), inline)
        if valid is None:
            return val
        return where(valid, val, Const(n.attrs["value"], n.dtype), n.dtype)

    def reduction(self, n: Node, c: Sequence[Expr], mask: Expr | None, inline: set[int]) -> Expr:
        x = n.args[0]
        assert x is not None
        rank = x.type.rank
        if n.op in ("argmax", "argmin"):
            dims = list(range(rank)) if n.attrs["dim"] is None else [n.attrs["dim"] % max(rank, 1)]
            keep = n.attrs["keepdim"] and n.attrs["dim"] is not None
        else:
            dims = list(range(rank)) if n.attrs["dims"] is None else sorted(d % max(rank, 1) for d in n.attrs["dims"])
            keep = n.attrs["keepdim"]

        def body(tag: str) -> tuple[Expr, tuple[Var, ...]]:
            vs = tuple(self.fresh(x.shape[d], tag) for d in dims)
            it = iter(c)
            idx: list[Expr] = []
            for d in range(rank):
                if d in dims:
                    idx.append(vs[dims.index(d)])
                    if keep:
                        next(it)
                else:
                    idx.append(next(it))
            return self.expr(x, idx, mask, inline), vs

        count = math.prod(x.shape[d] for d in dims)
        acc = x.dtype if x.dtype in ("f16", "bf16", "f32", "f64") else n.dtype
        if n.op in REDUCE_OPS:
            b, vs = body("r")
            r: Expr = Reduce(REDUCE_OPS[n.op], b, vs, n.dtype)
            return op("div", [r, _count(count, n.dtype)], n.dtype) if n.op == "mean" else r
        if n.op in ("argmax", "argmin"):
            b, vs = body("r")
            return Reduce(n.op, b, vs, n.dtype)
        if n.op in ("var", "std"):
            b1, v1 = body("r")
            b2, v2 = body("s")
            mean = op("div", [Reduce("sum", b1, v1, acc), _count(count, acc)], acc)
            dev = op("sub", [b2, mean], acc)
            denom = count - n.attrs["correction"] if is_dynamic(count) else max(count - n.attrs["correction"], 0.0)
            var = op("div", [Reduce("sum", op("mul", [dev, dev], acc), v2, acc), _count(denom, acc)], acc)
            return op("sqrt", [var], acc) if n.op == "std" else var
        if n.op == "norm":
            p = n.attrs["ord"]
            b, vs = body("r")
            ab = op("abs", [b], acc)
            if p == math.inf:
                return Reduce("max", ab, vs, acc)
            if p == -math.inf:
                return Reduce("min", ab, vs, acc)
            if p == 2.0:
                return op("sqrt", [Reduce("sum", op("mul", [b, b], acc), vs, acc)], acc)
            if p == 1.0:
                return Reduce("sum", ab, vs, acc)
            powed = op("pow", [ab, Const(float(p), acc)], acc)
            return op("pow", [Reduce("sum", powed, vs, acc), Const(1.0 / p, acc)], acc)
        raise LoweringError(f"no kernel-IR lowering for {n.op}")

    def contraction(self, n: Node, c: Sequence[Expr], mask: Expr | None, inline: set[int]) -> Expr:
        a, b = n.args[0], n.args[1]
        assert a is not None and b is not None
        if n.op == "linear":
            k = self.fresh(b.shape[1], "k")
            prod = op("mul", [self.expr(a, list(c[:-1]) + [k], mask, inline),
                              self.expr(b, [c[-1], k], mask, inline)], n.dtype)
            out: Expr = Reduce("dot", prod, (k,), n.dtype)
            bias = n.args[2] if len(n.args) > 2 else None
            if bias is not None:
                out = op("add", [out, self.expr(bias, [c[-1]], mask, inline)], n.dtype)
            return out
        k = self.fresh(a.shape[-1], "k")
        ra, rb = a.type.rank, b.type.rank
        cc = list(c)
        m = [] if ra == 1 else [cc.pop(-2 if rb > 1 else -1)]
        nn_ = [] if rb == 1 else [cc.pop(-1)]
        batch = cc
        a_idx = _broadcast(a.shape[:-2], tuple(d for d in n.shape[:len(batch)]), batch) + m + [k] if ra > 1 else [k]
        b_idx = _broadcast(b.shape[:-2], tuple(d for d in n.shape[:len(batch)]), batch) + [k] + nn_ if rb > 1 else [k]
        prod = op("mul", [self.expr(a, a_idx, mask, inline), self.expr(b, b_idx, mask, inline)], n.dtype)
        return Reduce("dot", prod, (k,), n.dtype)


def _reshape_chunks(old: Sequence[int], new: Sequence[int]) -> list[tuple[list[int], list[int]]] | None:
    """A reshape as chunks (old dims, new dims) with equal products, each the smallest such run: a dim
    split in several needs no division, only a dim merged from several does. None for run-time sizes or
    empty tensors (the flat re-split then)."""
    if any(type(d) is not int or d == 0 for d in (*old, *new)):
        return None
    out, i, j = [], 0, 0
    while i < len(old) or j < len(new):
        oi: list[int] = []
        nj: list[int] = []
        po = pn = 1
        if i < len(old):
            oi.append(i)
            po, i = po * old[i], i + 1
        if j < len(new):
            nj.append(j)
            pn, j = pn * new[j], j + 1
        while po != pn:
            if po < pn and i < len(old):
                oi.append(i)
                po, i = po * old[i], i + 1
            elif pn < po and j < len(new):
                nj.append(j)
                pn, j = pn * new[j], j + 1
            else:
                return None
        out.append((oi, nj))
    return out


def _chunked_index(old: Sequence[int], new: Sequence[int], chunks: list[tuple[list[int], list[int]]],
                   c: Sequence[Expr]) -> list[Expr]:
    idx: list[Expr] = [ic(0)] * len(old)
    for oi, nj in chunks:
        if len(oi) == 1 and len(nj) == 1:
            idx[oi[0]] = c[nj[0]]
            continue
        flat: Expr = ic(0)
        for j, st in zip(nj, row_major_strides([new[j] for j in nj])):
            flat = iop("+", flat, iop("*", c[j], ic(st)))
        for i, st in zip(oi, row_major_strides([old[i] for i in oi])):
            if old[i] != 1:  # a size-1 axis stays at 0
                idx[i] = iop("%", flat if st == 1 else iop("//", flat, ic(st)), ic(old[i]))
    return idx


def _iabs(e: Expr) -> Expr:
    return iop("max", e, iop("-", ic(0), e))


def _broadcast(src: Sequence[int], dst: Sequence[int], c: Sequence[Expr]) -> list[Expr]:
    """Index into a tensor of shape `src` broadcast (right-aligned) to `dst` at coordinates `c`."""
    off = len(dst) - len(src)
    return [ic(0) if s == 1 and dst[off + i] != 1 else c[off + i] for i, s in enumerate(src)]


def lower(g: Graph, plan: FusionPlan | None = None, generated: frozenset[str] = frozenset()) -> KernelProgram:
    """The graph (already simplified and decomposed) as a kernel program, one step per stored value;
    `generated`: library ops the backend generates kernels for (see `needs_library`)."""
    plan = plan or g.plan or fuse(g)
    lw = _Lowerer(g, generated)
    users = g.users()
    steps: list[Kernel | LibraryCall] = []
    for grp in plan.groups:
        lowered = _lower_group(lw, grp, users, grp.id, len(steps))
        if grp.rows:
            if not row_kernels(lowered):  # row fusion checks this before it merges
                raise LoweringError(f"row-fused group {grp.id} does not lower to row kernels")
            lowered = [replace(s, kind="rownorm") for s in lowered]
        elif grp.flash:  # attention fusion checks it lowers to one attention kernel before it merges
            lowered = [replace(s, kind="attention") for s in lowered]
        steps += lowered
    produced = {s.out.name for s in steps}
    outputs: list[Buf] = []
    for i, o in enumerate(g.outputs):
        b = lw.buf(o)
        if b.name in produced and b not in outputs:
            outputs.append(b)
            continue
        # a constant output (a folded softmax over a size-1 axis), an input or weight returned as is,
        # or one value returned twice: each output gets a buffer of its own
        out = Buf(f"{o.name}_out{i}" if b.role in ("input", "param") or b in outputs else b.name, o.shape, o.dtype,
                  "output")
        coords = tuple(lw.fresh(d, "c") for d in o.shape)
        steps.append(Kernel(f"k{len(steps)}_{out.name}", "pointwise", out, coords,
                            lw.expr(o, list(coords), None, set()), -1))
        produced.add(out.name)
        outputs.append(out)
    inputs = [lw.bufs[id(n)] for n in g.inputs]
    params = [lw.bufs[id(n)] for n in g.params]
    return KernelProgram(g.name, inputs, params, lw.consts, steps, outputs)


def row_kernels(steps: Sequence[Kernel | LibraryCall]) -> bool:
    """Whether lowered steps are kernels whose every reduction depends on output (row) coordinates
    alone: the condition for one kernel per row."""
    return all(isinstance(s, Kernel) and row_split(s) is not None for s in steps)


def lower_group(g: Graph, grp: Group) -> list[Kernel | LibraryCall]:
    """One group lowered on its own (row fusion asks what its merge would lower to)."""
    return _lower_group(_Lowerer(g), grp, g.users(), grp.id, 0)


def _lower_group(lw: _Lowerer, grp: Group, users: dict[Node, list[Node]], gid: int,
                 first: int) -> list[Kernel | LibraryCall]:
    """One step per value of the group that must live in memory; everything else inlined."""
    steps: list[Kernel | LibraryCall] = []
    members = {id(n) for n in grp.nodes}
    stored: list[Node] = []
    for n in grp.nodes:
        lib_operand = any(needs_library(u, lw.generated) and id(u) in members for u in users[n])
        escapes = id(n) in lw.out_ids or any(id(u) not in members for u in users[n])
        # a scan is stored where it is computed: its kernel's tile runs along the scanned axis, so the
        # output position there must be that axis itself (an epilogue reads it in the next kernel)
        if needs_library(n, lw.generated) or lib_operand or escapes or n.op in SCAN_OPS:
            stored.append(n)
    stored_ids = {id(n) for n in stored}
    for n in stored:
        if needs_library(n, lw.generated):
            for a in n.args:  # a constant a torch call reads (a scatter's zeros) lives in memory, written here
                if a is not None and a.op in ("scalar", "full", "arange") and id(a) not in lw.bufs:
                    cs = tuple(lw.fresh(d, "c") for d in a.shape)
                    steps.append(Kernel(f"k{first + len(steps)}_{a.name}", "pointwise", lw.buf(a), cs,
                                        lw.expr(a, list(cs), None, set()), gid))
            args = tuple(lw.buf(a) if a is not None else None for a in n.args)
            steps.append(LibraryCall(f"lib_{n.name}", n.op, args, dict(n.attrs), lw.buf(n), gid))
            continue
        inline = {id(m) for m in grp.nodes if id(m) not in stored_ids or m is n}
        coords = tuple(lw.fresh(d, "c") for d in n.shape)
        lw.memo = {}
        e = lw.expr(n, list(coords), None, inline)
        reds = _reductions(e)
        kind = "matmul" if any(r.op == "dot" for r in reds) else "reduce" if reds else "pointwise"
        if any(isinstance(x, Scan) for x in walk(e)):
            kind = "scan"
        steps.append(share_reductions(Kernel(f"k{first + len(steps)}_{n.name}", kind, lw.buf(n), coords, e, gid)))
    return steps


def _reductions(e: Expr) -> list[Reduce]:
    return [x for x in walk(e) if isinstance(x, Reduce)]


def _count(n: Any, dtype: str) -> Expr:
    """An element count as a value of `dtype`: a constant, or the run-time size cast (--dynamic)."""
    if is_dynamic(n):
        return op("cast", [Const(n, I64)], dtype, dtype=dtype)
    return Const(float(n), dtype)
