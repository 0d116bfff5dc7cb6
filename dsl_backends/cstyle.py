"""The C-style renderer base shared by C++, CUDA-C and Metal: types, constants, the expression
printer (one `const auto` per node) and the op table. Subclasses choose the math namespace, the
qualifiers and the loop structure of each template."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ir.kernel.analysis import split_gemm
from ir.kernel.build import ic, iop
from ir.kernel.divmod import chunked, simplify_index
from ir.kernel.ir import Const, Expr, IOp, Kernel, Load, Op, Reduce, Var, free_vars, walk
from ir.sym import is_dynamic

from .base import UnsupportedKernel
from .exprs import FLOATS
from .prefetch import row_prefetches

# elements per block of a serial arg-max/min: the block's extreme in SIMD lanes, then, where it beats the
# running one, the block searched again for its index while it is in L1 (4 KiB of floats)
ARG_BLOCK = 1024
# a vectorised fp32 sum's chunk: terms per fp32 partial (each SIMD lane adds CHUNK_SUM / lanes of them);
# an innermost axis shorter than CHUNK_MIN keeps double lanes (a partial per few terms gains nothing).
# Chunks of 512 made a log-softmax's exp-sum slower than double lanes (each chunk's horizontal add and tail)
CHUNK_SUM, CHUNK_MIN = 4096, 32
# a chunk's fp32 partials: this many, each element's term added to the one of its position mod this, so the
# adds of neighbouring vectors do not wait on each other (one vector's add latency bounded an L2-resident
# sum at half the cache's rate)
SUM_LANES = 32
CTYPES = {"f32": "float", "f64": "double", "i64": "int64_t", "i32": "int32_t", "i16": "int16_t", "i8": "int8_t",
          "u8": "uint8_t", "bool": "bool", "f16": "uint16_t", "bf16": "uint16_t"}


class CStyle:
    math_ns = "std::"  # where exp, log, ... live
    restrict = "__restrict__"
    acc_float = "double"  # accumulator of float reductions (serial loops on a CPU: double keeps torch's error)
    serial_acc_float = "double"  # accumulator of a reduction one thread runs alone (a long serial sum)
    fmax_call = True  # maximum/minimum of non-NaN values through fmax/fmin (else a compare and select)
    simd_lanes = 0  # serial max/min/arg- reductions over one axis of >= 4x this many run as SIMD reductions (0: never)
    simd_sums = False  # a serial sum may be vectorised (OpenMP simd reduction: lanes of double partial sums)
    chunk_sums = False  # ... as fp32 lanes per chunk of the innermost axis, each chunk added to the double
    bounded_index = False  # loops never step past an extent: quotients and remainders may be split (divmod)
    prefetch_bytes = 0  # a serial sum over row-major rows prefetches this far ahead of each chunk (0: never)

    def ctype(self, dt: str) -> str:
        return CTYPES[dt]

    def ctype_compute(self, dt: str) -> str:
        return "float" if dt in ("f16", "bf16") else CTYPES[dt]

    def const(self, value: Any, dtype: str) -> str:
        if dtype == "bool":
            return "true" if value else "false"
        if dtype in FLOATS:
            v = float(value)
            t = self.ctype_compute(dtype)
            if math.isnan(v):
                return self.nan(t)
            if math.isinf(v):
                return self.inf(v < 0, t)
            return f"(({t}){v!r})"
        v = value if is_dynamic(value) else int(value)  # a run-time size (--dynamic) stays its expression
        return f"((int64_t){v})" if dtype == "i64" else f"(({CTYPES[dtype]}){v})"

    def nan(self, t: str) -> str:
        return f"std::numeric_limits<{t}>::quiet_NaN()"

    def inf(self, negative: bool, t: str) -> str:
        return f"{'-' if negative else ''}std::numeric_limits<{t}>::infinity()"

    def int_limit(self, lowest: bool) -> str:
        return "INT64_MIN" if lowest else "INT64_MAX"

    def fn(self, name: str, t: str = "double") -> str:
        """The math function `name` for compute type `t` (a C type)."""
        return self.math_ns + name

    def load(self, buf_dtype: str, ptr: str) -> str:
        if buf_dtype == "bf16":
            return f"akg_bf16_to_f32({ptr})"
        if buf_dtype == "f16":
            return f"akg_f16_to_f32({ptr})"
        return ptr

    def masked_load(self, buf_dtype: str, buf: str, flat: str, mask: str, other: str, numel: str) -> str:
        """The element at `flat` where `mask` holds, else `other`; memory is touched only where it holds."""
        return self.branch_load(buf_dtype, buf, flat, mask, other)

    def branch_load(self, buf_dtype: str, buf: str, flat: str, mask: str, other: str) -> str:
        """`masked_load` as a branch (a style may print a masked load otherwise where the mask varies along
        its vector loop; see CPrinter.vector_vars)."""
        return f"({mask} ? {self.load(buf_dtype, f'{buf}[{flat}]')} : {other})"

    def store(self, out_dtype: str, val: str) -> str:
        if out_dtype == "bf16":
            return f"akg_f32_to_bf16((float)({val}))"
        if out_dtype == "f16":
            return f"akg_f32_to_f16((float)({val}))"
        return f"({CTYPES[out_dtype]})({val})"

    # the composites this table spells itself (the math library's are more accurate); every other
    # composite reaches it expanded into primitives (ir.kernel.expand)
    overrides = frozenset({"expm1", "log1p", "trunc"})

    # --- pointwise ops on scalars: the primitives plus `overrides`
    def op(self, e: Op, a: list[str]) -> str:
        t = self.ctype_compute(e.dtype)

        def f(name: str) -> str:
            return self.fn(name, t)

        if e.dtype in FLOATS or e.op in ("cast", "where"):
            a = [x if e.op in ("where", "cast", "eq", "ne", "lt", "le", "gt", "ge") else f"(({t})({x}))" for x in a]
        table = {
            "add": "({0} + {1})", "sub": "({0} - {1})", "mul": "({0} * {1})", "eq": "({0} == {1})",
            "ne": "({0} != {1})", "lt": "({0} < {1})", "le": "({0} <= {1})", "gt": "({0} > {1})",
            "ge": "({0} >= {1})", "logical_and": "(({0}) && ({1}))", "logical_or": "(({0}) || ({1}))",
            "neg": "(-{0})", "abs": f"{f('fabs')}({{0}})", "exp": f"{f('exp')}({{0}})", "log": f"{f('log')}({{0}})",
            "log1p": f"{f('log1p')}({{0}})", "expm1": f"{f('expm1')}({{0}})", "sqrt": f"{f('sqrt')}({{0}})",
            "sin": f"{f('sin')}({{0}})", "cos": f"{f('cos')}({{0}})", "tanh": f"{f('tanh')}({{0}})",
            "erf": f"{f('erf')}({{0}})", "floor": f"{f('floor')}({{0}})", "ceil": f"{f('ceil')}({{0}})",
            "round": f"{f('nearbyint')}({{0}})", "trunc": f"{f('trunc')}({{0}})", "logical_not": "(!({0}))",
            "pow": f"{f('pow')}({{0}}, {{1}})",
            "atan2": f"{f('atan2')}({{0}}, {{1}})",
        }
        o = e.op
        if o in table:
            return table[o].format(*a)
        if o == "where":
            return self.select(a[0], a[1], a[2], t)
        if o == "div":
            if e.dtype not in FLOATS:
                raise UnsupportedKernel("integer division")
            return f"({a[0]} / {a[1]})"
        if o in ("maximum", "minimum"):
            g = f("fmax") if o == "maximum" else f("fmin")
            if e.dtype not in FLOATS:
                return f"({a[0]} {'>' if o == 'maximum' else '<'} {a[1]} ? {a[0]} : {a[1]})"
            num = [isinstance(x, Const) and isinstance(x.value, (int, float)) and x.value == x.value for x in e.args]
            if num[0] != num[1]:  # NaN only from the other side: one comparison false on NaN keeps it (a
                # clamp or relu-like bound: 2.5x faster than the general form on the CPU), the second
                # operand on a tie as below
                if num[1]:
                    return self.select(f"!(({a[0]}) {'<=' if o == 'maximum' else '>='} ({a[1]}))", a[0], a[1], t)
                return self.select(f"({a[0]}) {'>' if o == 'maximum' else '<'} ({a[1]})", a[0], a[1], t)
            if not self.fmax_call:  # a NaN first operand is kept by its own test, a NaN second one by the
                # comparison's falling through to it; `|`, not `||`: gcc left a pooling window's short-circuit
                # chain scalar (a max pool + Mish kernel 3.5x slower, KernelBench level 2 #35 on the CPU)
                return self.select(f"(({a[0]}) {'>' if o == 'maximum' else '<'} ({a[1]})) | (({a[0]}) != ({a[0]}))",
                                   a[0], a[1], t)
            return self.select(f"({a[0]}) != ({a[0]}) || ({a[1]}) != ({a[1]})", f"({a[0]}) + ({a[1]})",
                               f"{g}({a[0]}, {a[1]})", t)
        if o == "remainder":
            if e.dtype in FLOATS:
                return f"({a[0]} - {f('floor')}({a[0]} / {a[1]}) * {a[1]})"
            return f"((({a[0]}) % ({a[1]}) + ({a[1]})) % ({a[1]}))"
        if o == "cast":
            dt = dict(e.attrs)["dtype"]
            if dt in ("bf16", "f16"):  # the value a half-precision tensor would hold, in float
                return f"akg_{dt}_to_f32(akg_f32_to_{dt}((float)({a[0]})))"
            return f"(({self.ctype_compute(dt)})({a[0]}))" if dt != "bool" else f"(({a[0]}) != 0)"
        raise UnsupportedKernel(f"no C rule for op {o!r}")

    def select(self, c: str, a: str, b: str, t: str) -> str:
        """`c ? a : b` where both sides are already computed (values of compute type `t`)."""
        return f"(({c}) ? ({a}) : ({b}))"

    def iop(self, e: IOp, a: str, b: str) -> str:
        infix = {"+": "+", "-": "-", "*": "*", "//": "/", "%": "%", "<": "<", "<=": "<=", "==": "==", "!=": "!=",
                 ">=": ">=", ">": ">", "and": "&&", "or": "||"}
        if e.op in infix:
            return f"({a} {infix[e.op]} {b})"
        return f"({a} {'<' if e.op == 'min' else '>'} {b} ? {a} : {b})"


def _linear(e: Expr) -> dict[str, int] | None:
    """An index expression as its coefficients per variable ("" the constant), or None where it is not
    linear (a division or a remainder that can wrap, a run-time size)."""
    if isinstance(e, Var):
        return {e.name: 1}
    if isinstance(e, Const):
        return {"": e.value} if isinstance(e.value, int) and not isinstance(e.value, bool) else None
    if isinstance(e, IOp) and e.op in ("%", "//") and isinstance(e.b, Const) and type(e.b.value) is int \
            and e.b.value > 0:  # a wrap or a quotient that the operand's range never reaches
        inner = _linear(e.a)
        ext = {v.name: v.extent for v in walk(e.a) if isinstance(v, Var)}
        if inner is None or any(c < 0 for c in inner.values()) or any(is_dynamic(x) for x in ext.values()):
            return None
        if inner.get("", 0) + sum(c * (ext[k] - 1) for k, c in inner.items() if k) >= e.b.value:
            return None
        return inner if e.op == "%" else {}
    if isinstance(e, IOp) and e.op in ("+", "-", "*"):
        a, b = _linear(e.a), _linear(e.b)
        if a is None or b is None:
            return None
        if e.op != "*":
            sign = 1 if e.op == "+" else -1
            return {k: a.get(k, 0) + sign * b.get(k, 0) for k in a.keys() | b.keys()}
        for x, y in ((a, b), (b, a)):
            if set(x) <= {""}:
                return {k: v * x.get("", 0) for k, v in y.items()}
    return None


def _reads_in_order(e: Load, coords: tuple[str, ...], shape: tuple[int, ...]) -> bool:
    """Whether a load reads its contiguous buffer at the flat position of the output element (a matmul's
    [256, 3072] read by a (2, 128, 3072) loop as (b * 128 + t, c)): then the loop's flat index is its index,
    not a division and a remainder per element, which keep gcc from vectorising the loop (24x on a GELU)."""
    if e.buf.numel != math.prod(shape) or any(is_dynamic(d) for d in (*shape, *e.buf.shape)):
        return False
    total: dict[str, int] = {}
    for idx, stride in zip(e.index, e.buf.strides()):
        lin = _linear(idx)
        if lin is None:
            return False
        for k, v in lin.items():
            total[k] = total.get(k, 0) + v * stride
    want, step = {}, 1
    for name, extent in reversed(list(zip(coords, shape))):
        if extent != 1:
            want[name] = step
        step *= extent
    return {k: v for k, v in total.items() if v} == want


class CPrinter:
    """Scalar statements for an expression DAG inside one loop scope. Reductions open loops."""

    parallel = False  # True where the threads of a block share each reduction (CUDA, Metal)

    def __init__(self, style: CStyle, env: dict[str, str], prefix: str = "t", indent: str = "") -> None:
        self.s, self.env, self.prefix, self.indent = style, dict(env), prefix, indent
        self.lines: list[str] = []
        self.names: dict[int, str] = {}
        self.fixed: dict[int, str] = {}
        self.counter = [0]
        self.simplified: dict[int, tuple[Expr, Expr]] = {}  # simplify_index's memo: shared nodes stay shared
        # (coordinate names, shape, flat index): a load of a buffer of that shape at exactly those
        # coordinates reads at the flat index (no decoded coordinates: the loop vectorises)
        self.identity: tuple[tuple[str, ...], tuple[int, ...], str] | None = None
        # the variables of the vectorised loop this printer's lines run in, where a template says: a mask or
        # a `where` condition free of them is the same for every lane, printed as a branch the compiler
        # unswitches (the loop is then specialised per case: no clamped gathers, no dead branch computed;
        # a decode step's key row, cache or new token, 11x faster)
        self.vector_vars: frozenset[str] = frozenset()

    def open_sweep(self, inner: CPrinter, axes: tuple[Var, ...]) -> None:
        """Called when a reduction's loop opens, `inner` printing its body (a printer whose threads
        share the reduction keeps what each thread loads in registers for the row's later sweeps)."""

    def online(self, m: Reduce, s: Reduce) -> None:
        """Called before a row's reductions with a maximum `m` and the sum `s` of exp(x - m) (a softmax's):
        a printer may compute both in one sweep (a serial loop here reads the row from cache twice)."""

    def column_loop(self, cols: list[tuple[str, int]], header: str, indent: str) -> tuple[str, CPrinter]:
        """A row kernel's loop over its columns and the printer of its body (serial, whatever this one is)."""
        return header, CPrinter(self.s, self.env, prefix="u", indent=indent)

    def scope(self, env: dict[str, str], indent: str) -> CPrinter:
        """A printer for a nested block: its own lines and `env`, the names, fixed values and fresh-name
        counter of this one (values of the enclosing scope are visible inside)."""
        inner = type(self)(self.s, env, self.prefix, indent)
        inner.counter, inner.fixed, inner.names = self.counter, self.fixed, dict(self.names)
        inner.simplified = self.simplified
        return inner

    def fresh(self) -> str:
        self.counter[0] += 1
        return f"{self.prefix}{self.counter[0]}"

    def emit(self, line: str) -> None:
        self.lines.append(self.indent + line)

    def __call__(self, e: Expr) -> str:
        if id(e) in self.fixed:
            return self.fixed[id(e)]
        if id(e) in self.names:
            return self.names[id(e)]
        if isinstance(e, Var):
            return self.env[e.name]
        if isinstance(e, Const):
            return self.s.const(e.value, e.dtype)
        if isinstance(e, Reduce):
            name = self.reduce(e)
        else:
            code = self.render(e)
            name = self.fresh()
            ty = "int64_t" if e.dtype == "i64" else "bool" if e.dtype == "bool" else self.s.ctype_compute(e.dtype)
            self.emit(f"const {ty} {name} = {code};")
        self.names[id(e)] = name
        return name

    def render(self, e: Expr) -> str:
        if isinstance(e, IOp):
            return self.s.iop(e, self(e.a), self(e.b))
        if isinstance(e, Load):
            ident = self.identity
            if ident and (e.buf.shape == ident[1] and tuple(getattr(i, "name", None) for i in e.index) == ident[0]
                          or _reads_in_order(e, ident[0], ident[1])):
                flat = ident[2]
            else:
                flat = self.flat_index(e)
            if e.mask is not None:
                other = self.s.const(e.other, e.buf.dtype if e.buf.dtype not in ("f16", "bf16") else "f32")
                if self.uniform(e.mask):
                    return self.s.branch_load(e.buf.dtype, e.buf.name, flat, self(e.mask), other)
                return self.s.masked_load(e.buf.dtype, e.buf.name, flat, self(e.mask), other, str(e.buf.numel))
            return self.s.load(e.buf.dtype, f"{e.buf.name}[{flat}]")
        if isinstance(e, Op):
            if e.op == "where" and self.uniform(e.args[0]):
                c, a, b = (self(x) for x in e.args)
                return f"(({c}) ? ({a}) : ({b}))"
            return self.s.op(e, [self(a) for a in e.args])
        raise UnsupportedKernel(type(e).__name__)

    def uniform(self, cond: Expr) -> bool:
        """Whether `cond` is the same in every lane of the printer's vector loop (`vector_vars`)."""
        return bool(self.vector_vars) and not (free_vars(cond) & self.vector_vars)

    def flat_index(self, e: Load) -> str:
        strides = e.buf.strides()
        nodes = [x for i in e.index for x in walk(i)]
        divmod_ = any(isinstance(x, IOp) and x.op in ("//", "%") for x in nodes)
        fixed = not any(is_dynamic(st) for st in strides) and not any(  # run-time sizes: no decision here
            isinstance(x, Const) and is_dynamic(x.value) or isinstance(x, Var) and is_dynamic(x.extent) for x in nodes)
        if self.s.bounded_index and divmod_ and fixed:
            # a reshape's re-split flat index read as the plain one it is (contiguous: no gather)
            flat = ic(0)
            for i, st in zip(e.index, strides):
                flat = iop("+", flat, iop("*", simplify_index(i, self.simplified), ic(st)))
            return self(simplify_index(flat, self.simplified))
        return " + ".join(f"{self(i)} * {s}" if s != 1 else self(i) for i, s in zip(e.index, strides)) or "0"

    def reduce(self, e: Reduce) -> str:
        # an inner reduction that does not use this one's variables is computed once, before the loop
        mine = {v.name for v in e.axes}
        for r in walk(e.body):
            if isinstance(r, Reduce) and r is not e and not (free_vars(r) & mine):
                self(r)
        ext = math.prod(v.extent for v in e.axes)
        float_body = e.body.dtype in FLOATS
        flat_body = not any(isinstance(r, Reduce) and r is not e and free_vars(r) & mine for r in walk(e.body))
        if (self.s.simd_lanes and not self.parallel and float_body and flat_body and len(e.axes) == 1 and
                e.op in ("max", "min", "argmax", "argmin") and isinstance(ext, int) and ext >= 4 * self.s.simd_lanes):
            return self.lanes(e)
        acc = self.fresh()
        ty = (self.s.acc_float if self.parallel else self.s.serial_acc_float) if float_body else "int64_t"
        lowest = e.op in ("max", "argmax")
        init = {"sum": "0", "dot": "0", "prod": "1"}.get(e.op) or self.s.inf(lowest, "double")
        if not float_body and e.op in ("max", "min", "argmax", "argmin"):
            init = self.s.int_limit(lowest)
        self.emit(f"{ty} {acc} = {init};")
        if e.op in ("argmax", "argmin"):
            self.emit(f"int64_t {acc}_i = 0;")
        parallel = self.parallel
        # a serial reduction other than arg-max/min loops over each axis in turn (no division per element,
        # the innermost loop reads contiguously); one thread's sum may be vectorised
        nested = not parallel and e.op not in ("argmax", "argmin")
        # no simd region nested in another (an inner reduction of none of these axes was hoisted above)
        simd = f"#pragma omp simd reduction(+:{acc})" if (self.s.simd_sums and nested and flat_body and
                                                           e.op in ("sum", "dot")) else None
        depth, j = len(e.axes), ""
        last = e.axes[-1].extent
        # fp32 partial sums in the SIMD lanes over each run of the innermost axis (chunks of CHUNK_SUM),
        # each added to the double: a conversion and a double add per element halved the lanes' rate
        part = self.fresh() if (simd and self.s.chunk_sums and e.body.dtype == "f32" and isinstance(last, int)
                                and last >= CHUNK_MIN) else ""
        ahead = row_prefetches(e, self.flat_index, self.s.prefetch_bytes) if part else []
        chunk = min([CHUNK_SUM, *(n for _, _, n, _ in ahead)])
        if nested:
            for i, v in enumerate(e.axes):
                if part and i == depth - 1:
                    c, lo, hi = f"{part}_c", "0", str(last)
                    if last > chunk:
                        lo, hi = c, f"std::min<int64_t>({last}, {c} + {chunk})"
                        self.emit(f"for (int64_t {c} = 0; {c} < {last}; {c} += {chunk}) {{")
                    else:
                        self.emit("{")  # one chunk: the run itself
                    for buf, start, n, line in ahead:  # one prefetch a cache line
                        self.emit(f"for (int64_t akg_pf = {lo}; akg_pf < {hi}; akg_pf += {line}) "
                                  f"__builtin_prefetch({buf} + ({start}) + {n} + akg_pf);")
                    self.emit(f"const int64_t {part}_e = {hi};")
                    self.emit(f"float {part}[{SUM_LANES}] = {{}};")
                    self.emit(f"int64_t {part}_b = {lo};")
                    self.emit(f"for (; {part}_b + {SUM_LANES} <= {part}_e; {part}_b += {SUM_LANES}) {{")
                    self.emit("#pragma omp simd")
                    self.emit(f"for (int64_t {part}_l = 0; {part}_l < {SUM_LANES}; ++{part}_l) {{")
                    continue
                if simd and i == depth - 1:
                    self.emit(simd)
                self.emit(f"for (int64_t {v.name} = 0; {v.name} < {v.extent}; ++{v.name}) {{")
        else:  # one flat index: arg-max/min record it, a block's threads stride it
            depth, j = 1, self.fresh()
            self.emit(self.loop_header(j, ext, parallel))
        inner = self.scope(self.env, self.indent + "    ")
        inner.parallel = False  # a reduction nested in a parallel one runs serially in each thread
        if parallel:
            self.open_sweep(inner, e.axes)
        stride = 1
        for v in reversed(e.axes):
            inner.env[v.name] = f"{v.name}"
            if not nested:
                inner.emit(f"const int64_t {v.name} = ({j} / {stride}) % {v.extent};")
            stride *= v.extent
        body = e.body
        if part:  # the innermost axis's position in the chunk's run of lanes
            inner.emit(f"const int64_t {e.axes[-1].name} = {part}_b + {part}_l;")
            if last > chunk:  # remainders and quotients by multiples of the chunk: read off its start
                inner.env[f"{part}_c"] = f"{part}_c"
                body = chunked(body, e.axes[-1], Var(f"{part}_c", last), chunk)
        b = inner(body)
        if part:
            inner.emit(f"{part}[{part}_l] += {b};")
            inner.emit("}")
            inner.emit("}")  # the chunk's whole runs of lanes, then its tail into the first lane
            tail = self.scope(self.env, self.indent + "    ")
            tail.env.update((v.name, v.name) for v in e.axes)
            tail.emit(f"for (int64_t {e.axes[-1].name} = {part}_b; {e.axes[-1].name} < {part}_e; "
                      f"++{e.axes[-1].name}) {{")
            bt = tail(e.body)
            tail.emit(f"{part}[0] += {bt};")
            tail.emit("}")
            tail.emit(f"float {part}_s = 0;")
            tail.emit(f"for (int {part}_l = 0; {part}_l < {SUM_LANES}; ++{part}_l) {part}_s += {part}[{part}_l];")
            tail.emit(f"{acc} += {part}_s;")
            inner.lines += tail.lines
        elif e.op in ("sum", "dot"):
            inner.emit(f"{acc} += {b};")
        elif e.op == "prod":
            inner.emit(f"{acc} *= {b};")
        elif e.op in ("max", "min"):
            cmp = ">" if e.op == "max" else "<"
            inner.emit(f"if (({b}) {cmp} {acc} || ({b}) != ({b})) {acc} = {b};")
        else:
            cmp = ">" if e.op == "argmax" else "<"
            better = beats(b, acc, cmp)
            inner.emit(f"if ({better}) {{ {acc} = {b}; {acc}_i = {j}; }}")
        self.lines += inner.lines
        for _ in range(depth):
            self.emit("}")
        if parallel:
            self.combine_threads(e.op, acc)
        return f"{acc}_i" if e.op in ("argmax", "argmin") else f"(({self.s.ctype_compute(e.dtype)}){acc})"

    def lanes(self, e: Reduce) -> str:
        """A max/min reduction over one axis as an OpenMP SIMD reduction (vmaxps), NaN noted apart and put
        back; an arg- one the same per block of `ARG_BLOCK` elements, the index then searched only in a block
        whose extreme beats the running one (a block in L1; few blocks do after the first): one pass over
        memory at the speed of the plain reduction. NaN wins and the first index among equals, as in torch.
        A compare-and-select of value and index per element vectorises poorly (int64 index lanes)."""
        v, n = e.axes[0], e.axes[0].extent
        acc, t, arg = self.fresh(), self.s.ctype_compute(e.body.dtype), e.op.startswith("arg")
        cmp = ">" if e.op in ("max", "argmax") else "<"
        op = "max" if e.op in ("max", "argmax") else "min"
        init = self.s.inf(e.op in ("max", "argmax"), t)
        if not arg:
            self.emit(f"{t} {acc} = {init}; int {acc}_nan = 0;")
            self._extreme(e, acc, op, cmp, "0", str(n))
            self.emit(f"if ({acc}_nan) {acc} = {self.s.nan(t)};")
            return f"(({self.s.ctype_compute(e.dtype)}){acc})"
        blk = f"{acc}_blk"
        self.emit(f"{t} {acc} = {init}; int64_t {acc}_i = 0;")
        self.emit(f"for (int64_t {acc}_o = 0; {acc}_o < {n}; {acc}_o += {ARG_BLOCK}) {{")
        self.emit(f"    const int64_t {acc}_e = std::min<int64_t>({n}, {acc}_o + {ARG_BLOCK});")
        self.emit(f"    {t} {blk} = {init}; int {blk}_nan = 0;")
        body = self.scope(self.env, self.indent + "    ")
        body._extreme(e, blk, op, cmp, f"{acc}_o", f"{acc}_e")
        self.lines += body.lines
        # the first NaN ends the search (none after it wins); else the first element equal to a new extreme
        searches = ((f"{blk}_nan", "({x}) != ({x})", True), (f"{blk} {cmp} {acc}", f"({{x}}) == {blk}", False))
        for cond, hit, stop in searches:
            self.emit(f"    {'' if stop else 'else '}if ({cond}) {{")
            self.emit(f"        for (int64_t {v.name} = {acc}_o; {v.name} < {acc}_e; ++{v.name}) {{")
            find = self.scope({**self.env, v.name: v.name}, self.indent + "            ")
            x = find(e.body)
            find.emit(f"if ({hit.format(x=x)}) {{ {acc} = {x}; {acc}_i = {v.name}; break; }}")
            self.lines += find.lines
            self.emit("        }")
            if stop:
                self.emit("        break;")
            self.emit("    }")
        self.emit("}")
        return f"{acc}_i"

    def _extreme(self, e: Reduce, acc: str, op: str, cmp: str, lo: str, hi: str) -> None:
        """`acc` = the max/min of the body over [lo, hi) in SIMD lanes, `acc`_nan set if any element is NaN."""
        v, t = e.axes[0], self.s.ctype_compute(e.body.dtype)
        self.emit(f"#pragma omp simd reduction({op}:{acc}) reduction(|:{acc}_nan)")
        self.emit(f"for (int64_t {v.name} = {lo}; {v.name} < {hi}; ++{v.name}) {{")
        inner = self.scope({**self.env, v.name: v.name}, self.indent + "    ")
        b = inner(e.body)
        inner.emit(f"const {t} {acc}_x = {b};")
        inner.emit(f"{acc} = {acc}_x {cmp} {acc} ? {acc}_x : {acc};")
        inner.emit(f"{acc}_nan |= {acc}_x != {acc}_x;")
        self.lines += inner.lines
        self.emit("}")

    def loop_header(self, j: str, ext: int, parallel: bool) -> str:
        return f"for (int64_t {j} = 0; {j} < {ext}; ++{j}) {{"

    def combine_threads(self, op: str, acc: str) -> None:
        raise UnsupportedKernel("this printer has no parallel reductions")


def beats(x: str, best: str, cmp: str) -> str:
    """Whether value `x` replaces the running `best` of a max (`cmp` ">") or min ("<"): NaN wins, as in
    torch, and an equal value does not (the first index is kept)."""
    return f"({x}) {cmp} {best} || (({x}) != ({x}) && {best} == {best})"


@dataclass(frozen=True)
class View:
    """A GEMM operand read straight from a buffer, seen as a 2-D matrix so that whole tiles can be
    copied (TileLang's T.copy, Triton's TMA descriptors): `k_first` when the reduction axis is the
    matrix's rows ([K, M] / [K, N] layouts)."""
    shape: tuple[int, int]
    k_first: bool
    batch: tuple[tuple[str, int], ...]  # batch coordinates the operand has (outermost dims)


def _view(e: Expr, batch: list[tuple[str, int]], own: list[tuple[str, int]], kv: Any, bk: int) -> View | None:
    if not isinstance(e, Load) or e.mask is not None or not all(isinstance(i, Var) for i in e.index):
        return None
    names = [i.name for i in e.index]  # type: ignore[attr-defined]
    pb = tuple(c for c in batch if c[0] in names)
    lead, rest = [c[0] for c in pb], [c[0] for c in own]
    shape = tuple(c[1] for c in pb)
    n_b, n_own = math.prod(shape), math.prod(c[1] for c in own)
    if names == lead + rest + [kv.name]:
        return View((n_b * n_own, kv.extent), False, pb)
    # K as rows: a tile past K would read the next batch's rows, which zero padding cannot cover
    if names == lead + [kv.name] + rest and (not pb or kv.extent % bk == 0):
        return View((n_b * kv.extent, n_own), True, pb)
    return None


def views(k: Kernel, bk: int) -> dict[str, View]:
    """The buffers a GEMM reads only as a plain operand (no prologue, mask or other use), which tile
    copies of K step `bk` can stage. A buffer read twice (x @ x.T) is not one of them."""
    if k.kind != "matmul":
        return {}
    g = split_gemm(k)
    loads = [e for e in walk(k.expr) if isinstance(e, Load)]
    out: dict[str, View] = {}
    for e, own in ((g.a, g.rows), (g.b, g.cols)):
        v = _view(e, g.batch, own, g.k, bk)
        if v is not None and e.buf.name not in out and sum(x.buf.name == e.buf.name for x in loads) == 1:
            out[e.buf.name] = v
    return out


def decode(names: list[tuple[str, int]], flat: str, p: CPrinter, bounded: bool = False, suffix: str = "") -> None:
    """Flat index -> named coordinates (row-major), as const locals of the printer's scope. `bounded`: the
    flat index is below the extents' product, so the outermost coordinate needs no modulo (a loop with
    an integer modulo in it stays scalar). `suffix`: the locals' names end in it (several decodes in one
    scope)."""
    stride = 1
    for i, (name, ext) in enumerate(reversed(names)):
        p.env[name] = local = name + suffix
        q = f"({flat} / {stride})" if stride > 1 else flat
        p.emit(f"const int64_t {local} = {q};" if bounded and i == len(names) - 1 else
               f"const int64_t {local} = {q} % {ext};")
        stride *= ext
