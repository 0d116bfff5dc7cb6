"""One Triton launch lifted into graph IR: its TTIR run once for every program of the grid at the same
time. Each value has the grid's axes in front of its block's (size 1 where it does not vary with the
program). What only depends on program ids, ranges and constants (addresses, masks, loop bounds, even a
seeded Philox draw) is computed here, exactly, with NumPy (`Num`); what depends on loaded data becomes
graph nodes (`Sym`). Loads and stores at computed addresses become views of the tensors where the
addresses are affine (`views`), gathers of constant indices where not. Loops are unrolled."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..convert import LiftCtx
from ..errors import AkgError
from ..graph import Node
from . import blocks, loops, padding, ttir, views
from .values import IR_DTYPE as _IR_DTYPE
from .values import Launch, Num, Ptr, Sym, Value, Write
from .values import block_of as _block_of
from .values import elem_of as _elem_of

_INT_BITS = {"i1": 1, "i8": 8, "i16": 16, "i32": 32, "i64": 64}
_FLOAT = {"f32": np.float32, "f16": np.float16, "f64": np.float64, "bf16": np.float32}
_TTIR_ELEM = {v: k for k, v in _IR_DTYPE.items()}  # IR dtype -> TTIR element type
MAX_UNROLLED = 4096  # loop iterations unrolled in one launch, over all its loops


def _wrap(a: np.ndarray, elem: str, unsigned: bool = False) -> np.ndarray:
    bits = _INT_BITS.get(elem)
    if bits is None or bits == 64 or a.dtype == np.bool_:
        return a
    if bits == 1:
        return (a & 1).astype(np.bool_)
    a = a.astype(np.int64) & ((1 << bits) - 1)
    return a if unsigned else np.where(a >= 1 << (bits - 1), a - (1 << bits), a)


def _unsigned(a: np.ndarray, elem: str) -> np.ndarray:
    bits = _INT_BITS.get(elem, 64)
    return a.astype(np.int64) & ((1 << bits) - 1) if bits < 64 else a.astype(np.uint64)


class Executor:
    def __init__(self, cx: LiftCtx, launch: Launch) -> None:
        self.cx, self.L = cx, launch
        grid = list(launch.grid) + [1] * 3
        rank = max([1] + [i + 1 for i, g in enumerate(launch.grid[:3]) if g > 1])
        self.grid = tuple(grid[:rank])
        self.env: dict[str, Value] = {}

    # --- helpers
    def fail(self, why: str) -> AkgError:
        return AkgError(f"cannot lift Triton kernel {self.L.name} ({self.L.where}): {why}")

    def rank(self, block: tuple[int, ...]) -> int:
        return len(self.grid) + len(block)

    def node(self, v: Num | Sym) -> Node:
        if isinstance(v, Sym):
            if v.pad is None:
                return v.n
            if v.padded is None:
                v.padded = views.pad_to(self.cx, v.n, list(v.n.shape), list(v.pad[0]), v.pad[1])
            return v.padded
        dt = _IR_DTYPE[v.elem]
        flat = v.a.reshape(-1)
        if flat.size and (flat == flat[0]).all():
            n = self.cx.graph.add("scalar", [], {"value": flat[0].item(), "dtype": dt}, name="c")
            return self.cx.add("reshape", [n], shape=[1] * v.a.ndim) if v.a.ndim else n
        a = v.a.astype(np.int64 if v.elem in ("i32", "i64") else v.a.dtype)
        n = views.constant(self.cx, a)
        want = _IR_DTYPE[v.elem]
        return n if n.dtype == want else self.cx.add("cast", [n], dtype=want)

    def full(self, v: Num | Sym, shape: tuple[int, ...]) -> Node:
        """`v` as a node of exactly `shape` (broadcast where it has size 1)."""
        n = self.node(v)
        if n.type.rank < len(shape):
            n = self.cx.add("reshape", [n], shape=[1] * (len(shape) - n.type.rank) + list(n.shape))
        return n if tuple(n.shape) == tuple(shape) else self.cx.add("expand", [n], shape=list(shape))

    def get(self, name: str) -> Value:
        try:
            return self.env[name]
        except KeyError:
            raise self.fail(f"value {name} is used before it is defined") from None

    # --- the kernel
    def run(self, body: list[ttir.Op]) -> None:
        for op in body:
            self.step(op)

    def step(self, op: ttir.Op) -> None:
        name = op.name
        if name in ("tt.return", "scf.yield", "tt.reduce.return", "tt.scan.return"):
            return
        if name == "scf.for":
            return self.loop(op)
        fn = _OPS.get(name)
        if fn is None:
            raise self.fail(f"the op {name} is not lifted yet (`{op.text[:80]}`)")
        out = fn(self, op)
        if isinstance(out, tuple):
            for r, v in zip(op.results, out):
                self.env[r] = v
        elif op.results:
            self.env[op.results[0]] = out

    def loop(self, op: ttir.Op) -> None:
        k, lo, hi, st = op.operands[:4]
        inits = [v for i, v in enumerate(op.operands[4:]) if i % 2 == 1]
        bounds = [self.get(x) for x in (lo, hi, st)]
        if not all(isinstance(b, Num) and b.a.size == 1 for b in bounds):
            raise self.fail("a loop whose bounds vary with the program or the data: not lifted yet")
        a, b, s = (int(x.a.reshape(-1)[0]) for x in bounds)  # type: ignore[union-attr]
        carried = [self.get(x) for x in inits]
        steps = range(a, b, s)
        whole = loops.run_whole(self, op, steps, carried)
        if whole is not None:
            for r, v in zip(op.results, whole):
                self.env[r] = v
            return
        self.L.unrolled += len(steps)
        if self.L.unrolled > MAX_UNROLLED:
            raise self.fail(f"its loops run more than {MAX_UNROLLED} iterations in all: not lifted yet")
        names = op.block_args[0]
        yields = op.regions[0][-1]
        for it in steps:
            self.env[names[0]] = Num(np.full((1,) * len(self.grid), it, dtype=np.int64), "i32")
            for n, v in zip(names[1:], carried):
                self.env[n] = v
            self.run(op.regions[0])
            carried = [self.get(x) for x in yields.operands]
        for r, v in zip(op.results, carried):
            self.env[r] = v


def _constant(ex: Executor, op: ttir.Op) -> Value:
    elem = _elem_of(op)
    v = ttir.constant(op.text, elem)
    block = _block_of(op)
    dt = _FLOAT.get(elem, np.bool_ if elem == "i1" else np.int64)
    return Num(np.full((1,) * ex.rank(block), v, dtype=dt), elem)


def _program_id(ex: Executor, op: ttir.Op) -> Value:
    axis = "xyz".index(op.text.split()[1])
    shape = [1] * len(ex.grid)
    if axis < len(ex.grid):
        shape[axis] = ex.grid[axis]
        return Num(np.arange(ex.grid[axis], dtype=np.int64).reshape(shape), "i32")
    return Num(np.zeros(shape, dtype=np.int64), "i32")


def _num_programs(ex: Executor, op: ttir.Op) -> Value:
    axis = "xyz".index(op.text.split()[1])
    return Num(np.full((1,) * len(ex.grid), (list(ex.L.grid) + [1, 1, 1])[axis], dtype=np.int64), "i32")


def _make_range(ex: Executor, op: ttir.Op) -> Value:
    lo, hi = int(op.attr("start") or 0), int(op.attr("end") or 0)  # type: ignore[union-attr]
    return Num(np.arange(lo, hi, dtype=np.int64).reshape((1,) * len(ex.grid) + (hi - lo,)), "i32")


def _reshape_to(ex: Executor, v: Value, block: tuple[int, ...], how: str, axis: int = 0) -> Value:
    """splat / broadcast / expand_dims / reshape of a value to `block`, its grid axes kept."""
    g = len(ex.grid)
    if isinstance(v, Ptr):
        return Ptr(v.arg, _reshape_to(ex, v.off, block, how, axis))  # type: ignore[arg-type]
    if isinstance(v, Num):
        a = v.a
        if how in ("splat", "broadcast"):
            a = a.reshape(a.shape[:g] + (1,) * (len(block) - (a.ndim - g)) + a.shape[g:])
            return Num(np.broadcast_to(a, a.shape[:g] + block), v.elem)
        if how == "expand_dims":
            return Num(np.expand_dims(a, g + axis), v.elem)
        return Num(np.broadcast_to(a, a.shape[:g] + a.shape[g:]).reshape(a.shape[:g] + block), v.elem)
    n = ex.node(v)
    gshape = list(n.shape[:g])
    if how in ("splat", "broadcast"):
        n = ex.cx.add("reshape", [n], shape=gshape + [1] * (len(block) - (n.type.rank - g)) + list(n.shape[g:]))
        return Sym(ex.cx.add("expand", [n], shape=gshape + list(block)), v.elem)
    if how == "expand_dims":
        shape = list(n.shape)
        shape.insert(g + axis, 1)
        return Sym(ex.cx.add("reshape", [n], shape=shape), v.elem)
    return Sym(ex.cx.add("reshape", [n], shape=gshape + list(block)), v.elem)


def _shape_op(how: str):  # noqa: ANN202 - a table entry
    def run(ex: Executor, op: ttir.Op) -> Value:
        axis = int(op.attr("axis") or 0) if how == "expand_dims" else 0  # type: ignore[union-attr]
        return _reshape_to(ex, ex.get(op.operands[0]), _block_of(op), how, axis)
    return run


def _trans(ex: Executor, op: ttir.Op) -> Value:
    order = [int(x) for x in op.text.split("array<i32:", 1)[1].split(">")[0].split(",")]
    g = len(ex.grid)
    perm = list(range(g)) + [g + o for o in order]
    v = ex.get(op.operands[0])
    if isinstance(v, Num):
        return Num(np.transpose(v.a, perm), v.elem)
    if isinstance(v, Ptr):
        raise ex.fail("a transposed block of pointers: not lifted yet")
    return Sym(ex.cx.add("permute", [ex.node(v)], dims=perm), v.elem)


# elementwise ops: (numpy function, graph op, result element ("" = the operand's))
_NP_BIN = {
    "addf": (np.add, "add"), "subf": (np.subtract, "sub"), "mulf": (np.multiply, "mul"), "divf": (np.divide, "div"),
    "addi": (np.add, "add"), "subi": (np.subtract, "sub"), "muli": (np.multiply, "mul"),
    "maxnumf": (np.fmax, "maximum"), "minnumf": (np.fmin, "minimum"), "maximumf": (np.maximum, "maximum"),
    "minimumf": (np.minimum, "minimum"), "maxsi": (np.maximum, "maximum"), "minsi": (np.minimum, "minimum"),
    "andi": (np.bitwise_and, "logical_and"), "ori": (np.bitwise_or, "logical_or"), "xori": (np.bitwise_xor, ""),
    "remf": (np.fmod, ""), "shli": (np.left_shift, ""),
    "divsi": (lambda a, b: np.trunc(a / np.where(b == 0, 1, b)).astype(np.int64), "div"),
    "remsi": (lambda a, b: np.fmod(a, np.where(b == 0, 1, b)), "remainder"),
    "floordivsi": (np.floor_divide, ""),
}
_UNSIGNED = {"divui": np.floor_divide, "remui": np.remainder, "shrui": np.right_shift, "maxui": np.maximum,
             "minui": np.minimum}
_NP_CMP = {"lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal, "eq": np.equal,
           "ne": np.not_equal}
_UNARY = {"math.exp": (np.exp, "exp"), "math.log": (np.log, "log"), "math.sqrt": (np.sqrt, "sqrt"),
          "tt.precise_sqrt": (np.sqrt, "sqrt"), "math.rsqrt": (lambda a: 1 / np.sqrt(a), "rsqrt"),
          "math.absf": (np.abs, "abs"), "math.absi": (np.abs, "abs"), "math.sin": (np.sin, "sin"),
          "math.cos": (np.cos, "cos"), "math.tanh": (np.tanh, "tanh"), "math.erf": (None, "erf"),
          "math.floor": (np.floor, "floor"), "math.ceil": (np.ceil, "ceil"), "arith.negf": (np.negative, "neg"),
          "math.log1p": (np.log1p, "log1p"), "math.expm1": (np.expm1, "expm1")}


def _binary(ex: Executor, op: ttir.Op) -> Value:
    kind = op.name.split(".", 1)[1]
    a, b = ex.get(op.operands[0]), ex.get(op.operands[1])
    if isinstance(a, Ptr) or isinstance(b, Ptr):
        raise ex.fail(f"{op.name} on pointers")
    elem = a.elem
    if isinstance(a, Num) and isinstance(b, Num):
        if kind in _UNSIGNED:
            out = _UNSIGNED[kind](_unsigned(a.a, elem), _unsigned(b.a, elem))
        elif kind == "mulhiui":
            bits = _INT_BITS[elem]
            out = (_unsigned(a.a, elem).astype(object) * _unsigned(b.a, elem).astype(object)) >> bits
            out = np.asarray(out, dtype=np.int64)
        elif kind == "shrsi":
            out = np.right_shift(a.a, b.a)
        else:
            out = _NP_BIN[kind][0](a.a, b.a)
        return Num(_wrap(np.asarray(out), elem) if elem in _INT_BITS else np.asarray(out).astype(a.a.dtype), elem)
    if isinstance(a, Sym) and a.pad or isinstance(b, Sym) and b.pad:
        got = padding.binary(ex, kind, a, b)
        if got is not None:
            return got
    if kind == "addf" and isinstance(a, Num) and not a.a.any():  # a loop's zero accumulator
        return b
    if kind == "addf" and isinstance(b, Num) and not b.a.any():
        return a
    gop = _NP_BIN.get(kind, (None, ""))[1]
    if not gop or elem not in _FLOAT and kind in ("andi", "ori") and elem != "i1":
        raise ex.fail(f"{op.name} on loaded data: not lifted yet")
    attrs = {"rounding_mode": "trunc"} if kind == "divsi" else {}
    return Sym(ex.cx.add(gop, [ex.node(a), ex.node(b)], **attrs), elem)


def _mulhi(ex: Executor, op: ttir.Op) -> Value:
    return _binary(ex, ttir.Op(op.results, "arith.mulhiui", op.text, op.operands))


def _compare(ex: Executor, op: ttir.Op) -> Value:
    pred = op.text.split()[1].rstrip(",")
    a, b = ex.get(op.operands[0]), ex.get(op.operands[1])
    if isinstance(a, Ptr) or isinstance(b, Ptr):
        raise ex.fail("a comparison of pointers")
    cmp = pred[-2:]
    if isinstance(a, Num) and isinstance(b, Num):
        x, y = (a.a, b.a) if not pred.startswith("u") or op.name == "arith.cmpf" else \
            (_unsigned(a.a, a.elem), _unsigned(b.a, b.elem))
        return Num(_NP_CMP[cmp](x, y), "i1")
    return Sym(ex.cx.add(cmp, [ex.node(a), ex.node(b)]), "i1")


def _select(ex: Executor, op: ttir.Op) -> Value:
    c, a, b = (ex.get(x) for x in op.operands[:3])
    if isinstance(a, Ptr) or isinstance(b, Ptr) or isinstance(c, Ptr):
        raise ex.fail("a select of pointers: not lifted yet")
    if isinstance(c, Num) and isinstance(a, Num) and isinstance(b, Num):
        return Num(np.where(c.a, a.a, b.a), a.elem)
    return Sym(ex.cx.add("where", [ex.node(c), ex.node(a), ex.node(b)]), a.elem)


def _unary(ex: Executor, op: ttir.Op) -> Value:
    a = ex.get(op.operands[0])
    if isinstance(a, Ptr):
        raise ex.fail(f"{op.name} of a pointer")
    fn, gop = _UNARY[op.name]
    if isinstance(a, Num) and fn is not None:
        return Num(np.asarray(fn(a.a)).astype(a.a.dtype), a.elem)
    return _padded_unary(ex, a, fn or np.vectorize(math.erf), lambda n: ex.cx.add(gop, [n]))


def _padded_unary(ex: Executor, a: Sym, fn: Any, build: Any) -> Sym:
    """A unary op; on a padded value, on its tensor part, the padding's value computed here."""
    if a.pad is None:
        return Sym(build(a.n), a.elem)
    with np.errstate(all="ignore"):
        fill = float(np.asarray(fn(np.float32(a.pad[1]))))
    return Sym(build(a.n), a.elem, (a.pad[0], fill))


def _exp2(ex: Executor, op: ttir.Op) -> Value:
    a = ex.get(op.operands[0])
    if isinstance(a, Num):
        return Num(np.exp2(a.a).astype(a.a.dtype), a.elem)
    assert isinstance(a, Sym)
    return _padded_unary(ex, a, np.exp2, lambda n: ex.cx.add("exp", [ex.cx.add("mul", [n, ex.cx.scalar(
        math.log(2.0), n)])]))


def _log2(ex: Executor, op: ttir.Op) -> Value:
    a = ex.get(op.operands[0])
    if isinstance(a, Num):
        return Num(np.log2(a.a).astype(a.a.dtype), a.elem)
    assert isinstance(a, Sym)
    return _padded_unary(ex, a, np.log2, lambda n: ex.cx.add("mul", [ex.cx.add("log", [n]), ex.cx.scalar(
        1 / math.log(2.0), n)]))


def _fma(ex: Executor, op: ttir.Op) -> Value:
    a, b, c = (ex.get(x) for x in op.operands[:3])
    assert not isinstance(a, Ptr) and not isinstance(b, Ptr) and not isinstance(c, Ptr)
    if isinstance(a, Num) and isinstance(b, Num) and isinstance(c, Num):
        return Num((a.a * b.a + c.a).astype(a.a.dtype), a.elem)
    return Sym(ex.cx.add("add", [ex.cx.add("mul", [ex.node(a), ex.node(b)]), ex.node(c)]), a.elem)


def _cast(ex: Executor, op: ttir.Op) -> Value:
    a = ex.get(op.operands[0])
    to = ttir.element(op.text.rsplit(" : ", 1)[1].split(" to ")[-1].split("->")[-1])
    if isinstance(a, Ptr):
        raise ex.fail("a cast of a pointer")
    if op.name == "tt.bitcast" or op.name == "arith.bitcast":
        if isinstance(a, Num) and to in _INT_BITS and a.elem in _INT_BITS:
            return Num(_wrap(a.a, to), to)
        if isinstance(a, Num) and to in _FLOAT and a.elem in _INT_BITS:
            width = {"f32": np.uint32, "f16": np.uint16, "f64": np.uint64}[to]
            return Num(_unsigned(a.a, a.elem).astype(width).view(_FLOAT[to]).reshape(a.a.shape), to)
        raise ex.fail(f"a bitcast of loaded data to {to}: not lifted yet")
    if isinstance(a, Num):
        if to in _FLOAT:
            src = _unsigned(a.a, a.elem) if op.name == "arith.uitofp" else a.a
            return Num(src.astype(_FLOAT[to]), to)
        if to == "i1":
            return Num(a.a != 0, to)
        src = np.trunc(a.a) if a.elem in _FLOAT else a.a
        return Num(_wrap(src.astype(np.int64), to), to)
    return Sym(ex.cx.add("cast", [ex.node(a)], dtype=_IR_DTYPE[to]), to)


def _addptr(ex: Executor, op: ttir.Op) -> Value:
    p, off = ex.get(op.operands[0]), ex.get(op.operands[1])
    if not isinstance(p, Ptr) or isinstance(off, Ptr):
        raise ex.fail("tt.addptr of something that is not a pointer plus an offset")
    if isinstance(p.off, Num) and isinstance(off, Num):
        return Ptr(p.arg, Num(p.off.a + off.a, "i64"))
    return Ptr(p.arg, Sym(ex.cx.add("add", [ex.node(p.off), ex.cx.add("cast", [ex.node(off)], dtype="i64")]), "i64"))


def _mask_of(ex: Executor, op: ttir.Op, i: int) -> Num | Sym | None:
    if len(op.operands) <= i:
        return None
    m = ex.get(op.operands[i])
    assert not isinstance(m, Ptr)
    return m


def _load(ex: Executor, op: ttir.Op) -> Value:
    p = ex.get(op.operands[0])
    if not isinstance(p, Ptr):
        raise ex.fail("tt.load of a tensor descriptor or block pointer: not lifted yet")
    mask, other = _mask_of(ex, op, 1), _mask_of(ex, op, 2)
    src = ex.L.tensors[p.arg]
    elem = _TTIR_ELEM[src.dtype]
    if isinstance(p.off, Num) and (mask is None or isinstance(mask, Num)):
        m = mask.a if mask is not None else None
        if ex.L.writes.get(p.arg):
            _reads_written(ex, p.arg, p.off.a, m)
        fill = other.a.reshape(-1)[0].item() if isinstance(other, Num) and other.a.size and \
            (other.a == other.a.reshape(-1)[0]).all() else 0.0
        uniform = other is None or isinstance(other, Num) and bool((other.a == fill).all())
        if uniform and m is not None:
            n, ext = views.gather_lazy(ex.cx, src, p.off.a, m, fill, f"Triton kernel {ex.L.name}")
            n.meta["port_read"] = (p.arg, p.off.a, m, fill)  # where a GEMM's tiles came from (`gemm`)
            if ext is not None:
                return Sym(n, elem, (tuple(np.broadcast_shapes(p.off.a.shape, m.shape)), float(fill)))
            return Sym(n, elem)
        n = views.gather(ex.cx, src, p.off.a, m, fill, f"Triton kernel {ex.L.name}")
        if other is not None and not (isinstance(other, Num) and (other.a == fill).all()) and m is not None:
            n = ex.cx.add("where", [ex.node(Num(np.broadcast_to(m, n.shape), "i1")), n,
                                    ex.node(other)])
        return Sym(n, elem)
    # an address computed from loaded data: a gather of the flat tensor
    idx = ex.node(p.off)
    n = views.gather_nodes(ex.cx, src, idx)
    if mask is not None:
        n = ex.cx.add("where", [ex.node(mask), n, ex.node(other) if other is not None else ex.cx.scalar(0, n)])
    return Sym(n, elem)


def _reads_written(ex: Executor, arg: str, off: np.ndarray, mask: np.ndarray | None) -> None:
    read = np.broadcast_to(off, np.broadcast_shapes(off.shape, mask.shape) if mask is not None else off.shape)
    read = read[np.broadcast_to(mask, read.shape)] if mask is not None else read.reshape(-1)
    for w in ex.L.writes[arg]:
        wrote = np.broadcast_to(w.off, np.broadcast_shapes(w.off.shape, w.mask.shape))[
            np.broadcast_to(w.mask, np.broadcast_shapes(w.off.shape, w.mask.shape))]
        if np.intersect1d(read, wrote).size:
            raise ex.fail(f"it reads {arg} where it has written it: not lifted yet")


def _store(ex: Executor, op: ttir.Op, atomic: bool = False) -> Value | None:
    p = ex.get(op.operands[0])
    val = ex.get(op.operands[1])
    mask = _mask_of(ex, op, 2)
    if not isinstance(p, Ptr) or isinstance(val, Ptr):
        raise ex.fail("a store through something that is not a pointer")
    if not isinstance(p.off, Num) or isinstance(mask, Sym):
        raise ex.fail("a store to an address (or under a mask) computed from loaded data: not lifted yet")
    m = mask.a if isinstance(mask, Num) else np.ones((1,) * p.off.a.ndim, dtype=bool)
    ex.L.writes.setdefault(p.arg, []).append(Write(p.off.a, val, m, atomic))
    return None


def _atomic(ex: Executor, op: ttir.Op) -> Value | None:
    kind = op.text.split()[1].rstrip(",")
    if kind != "fadd" and kind != "add":
        raise ex.fail(f"tt.atomic_rmw {kind}: only atomic adds are lifted yet")
    # its result (the old value) is left unbound: a kernel that reads it fails as reading an undefined value
    return _store(ex, ttir.Op([], op.name, op.text, list(op.operands)), atomic=True)


_OPS: dict[str, Any] = {
    "arith.constant": _constant, "tt.get_program_id": _program_id, "tt.get_num_programs": _num_programs,
    "tt.make_range": _make_range, "tt.splat": _shape_op("splat"), "tt.broadcast": _shape_op("broadcast"),
    "tt.expand_dims": _shape_op("expand_dims"), "tt.reshape": _shape_op("reshape"), "tt.trans": _trans,
    "arith.cmpi": _compare, "arith.cmpf": _compare, "arith.select": _select, "tt.addptr": _addptr,
    "tt.load": _load, "tt.store": _store, "tt.atomic_rmw": _atomic,
    "tt.scan": blocks.scan, "tt.reduce": blocks.reduce, "tt.dot": blocks.dot,
    "math.exp2": _exp2, "math.log2": _log2, "math.fma": _fma, "tt.mulhiui": _mulhi,
    "tt.precise_divf": lambda ex, op: _binary(ex, ttir.Op(op.results, "arith.divf", op.text, op.operands)),
}
for _k in list(_NP_BIN) + list(_UNSIGNED) + ["shrsi"]:
    _OPS[f"arith.{_k}"] = _binary
for _k in _UNARY:
    _OPS[_k] = _unary
for _k in ("extf", "truncf", "sitofp", "uitofp", "fptosi", "fptoui", "extsi", "extui", "trunci", "bitcast"):
    _OPS[f"arith.{_k}"] = _cast
_OPS["tt.bitcast"] = _cast
_OPS["tt.fp_to_fp"] = _cast
