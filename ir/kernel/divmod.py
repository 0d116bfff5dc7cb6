"""Quotients and remainders of index arithmetic taken apart where the operands' ranges allow.

A reshape composes as a flat index re-split: `(c0*65536 + c1*512 + c2) // 512 % 128` is `c1` once
the terms that are multiples of 512 are taken out and the rest is seen to stay below 512. Loads
written that way read contiguously again, so a C compiler vectorises them instead of gathering.

Exact only where every variable stays inside its extent and every operand is non-negative (then C's
truncating division and Python's floor division agree): backends whose loops never step past an
extent (the C++ one) may use it; a masked GPU lane beyond an extent may not.
"""

from __future__ import annotations

from dataclasses import replace

from .build import ic, iop
from .ir import Const, Expr, IOp, Load, Rewrite, Var, free_vars, index_bounds, walk

Linear = tuple[dict[Expr, int], int]  # atom -> coefficient, constant


def _linear(e: Expr) -> Linear:
    if isinstance(e, Const) and type(e.value) is int:  # not a run-time size (a subclass of int)
        return {}, e.value
    if isinstance(e, IOp) and e.op == "+":
        (ta, ca), (tb, cb) = _linear(e.a), _linear(e.b)
        out = dict(ta)
        for a, c in tb.items():
            out[a] = out.get(a, 0) + c
        return out, ca + cb
    if isinstance(e, IOp) and e.op == "*" and isinstance(e.b, Const) and type(e.b.value) is int:
        t, c = _linear(e.a)
        return {a: k * e.b.value for a, k in t.items()}, c * e.b.value
    if isinstance(e, IOp) and e.op == "*" and isinstance(e.a, Const) and type(e.a.value) is int:
        t, c = _linear(e.b)
        return {a: k * e.a.value for a, k in t.items()}, c * e.a.value
    return {e: 1}, 0


def linear(e: Expr) -> Linear:
    """`e` as a sum of atoms times integer coefficients plus a constant (an atom: anything not + or * by a
    constant)."""
    return _linear(e)


def _build(terms: dict[Expr, int], const: int) -> Expr:
    out: Expr = ic(const)
    for a, c in terms.items():
        if c:
            out = iop("+", out, iop("*", a, ic(c)))
    return out


def _rejoin(terms: dict[Expr, int], exact: bool = False) -> dict[Expr, int]:
    """(x // d) * d * k + (x % d) * k -> x * k, and ((x // d) % m) * d * k + (x % d) * k -> (x % (d*m)) * k:
    the re-split of a flat index put back together, inner digits first (a reshape that splits one
    axis into three reads x's digits of 64, 64 and the rest). `exact`: the joined remainder stays a
    remainder (no range of x assumed)."""
    out = dict(terms)
    changed = True
    while changed:
        changed = False
        for a in list(out):
            if not (isinstance(a, IOp) and a.op == "%" and isinstance(a.b, Const) and a in out):
                continue
            d, k = a.b.value, out[a]
            q = iop("//", a.a, a.b)
            digit = next((b for b, c in out.items() if c == k * d and isinstance(b, IOp) and b.op == "%"
                          and b.a == q and isinstance(b.b, Const) and type(b.b.value) is int), None)
            if out.get(q) == k * d:
                del out[a], out[q]
                out[a.a] = out.get(a.a, 0) + k
            elif digit is not None:
                del out[a], out[digit]
                low = iop("%", a.a, ic(d * digit.b.value)) if exact else _divmod("%", a.a, d * digit.b.value)
                out[low] = out.get(low, 0) + k
            else:
                continue
            changed = True
            break
    return out


def _nonneg(terms: dict[Expr, int], const: int) -> bool:
    return const >= 0 and all(c >= 0 and index_bounds(a)[0] >= 0 for a, c in terms.items())


def _divmod(op: str, x: Expr, d: int) -> Expr:
    terms, const = _linear(x)
    terms = {a: c for a, c in terms.items() if c}
    if not _nonneg(terms, const):
        return iop(op, x, ic(d))
    whole = {a: c // d for a, c in terms.items() if c % d == 0}
    part = {a: c for a, c in terms.items() if c % d}
    rest = _build(part, const % d)
    small = index_bounds(rest)[1] < d
    if not small and (digit := _digits(part, const % d, d)) is not None:
        high, low, t = digit  # rest = t * high + low, t | d, 0 <= low < t: low never carries
        if op == "//":
            return iop("+", _build(whole, const // d), _divmod("//", high, d // t))
        return iop("+", iop("*", _divmod("%", high, d // t), ic(t)), low)
    if op == "//":
        return iop("+", _build(whole, const // d), ic(0) if small else iop("//", rest, ic(d)))
    return rest if small else iop("%", rest, ic(d))


def _digits(terms: dict[Expr, int], const: int, d: int) -> tuple[Expr, Expr, int] | None:
    """`terms + const` as t * high + low with t dividing d and low in [0, t), the largest such t among
    the coefficients: the channel of a group norm's `(c*4096 + h*64 + w) // 32768` is `c // 8` (h*64 + w
    stays below 4096, and 4096 divides 32768). None where no coefficient splits the sum so."""
    for t in sorted({c for c in terms.values() if d % c == 0 and c > 1}, reverse=True):
        high = {a: c // t for a, c in terms.items() if c % t == 0}
        low = _build({a: c for a, c in terms.items() if c % t}, const)
        if index_bounds(low)[1] < t:
            return _build(high, 0), low, t
    return None


def simplify_index(e: Expr, memo: dict[int, tuple[Expr, Expr]] | None = None) -> Expr:
    """`e` with each `// d` and `% d` by a positive constant split over its operand's terms (see the
    module docstring for where this is exact), and re-split flat indices joined back. `memo` (node id ->
    (node, result)) keeps a node shared by several indices one node in the result."""
    memo = {} if memo is None else memo
    if id(e) in memo:
        return memo[id(e)][1]
    out = _simplify(e, memo)
    memo[id(e)] = (e, out)
    return out


def _simplify(e: Expr, memo: dict[int, tuple[Expr, Expr]]) -> Expr:
    if not isinstance(e, IOp):
        return e
    a, b = simplify_index(e.a, memo), simplify_index(e.b, memo)
    if e.op in ("//", "%") and isinstance(b, Const) and type(b.value) is int and b.value > 0:
        return _divmod(e.op, a, b.value)
    out = e if a is e.a and b is e.b else iop(e.op, a, b)  # the node itself: its sharing (CSE) kept
    if e.op == "+":
        terms, const = _linear(out)
        joined = _rejoin(terms)
        if joined != terms:
            return _build(joined, const)
    return out


def _exact(e: Expr) -> Expr:
    """`e` with re-split digits joined back by identities that hold for every operand (no ranges: a
    masked GPU lane may step past an extent): x // d * d + x % d -> x, (x // d) % m * d + x % d ->
    x % (d*m), (x % a) % b -> x % b and (x % a) // b -> (x // b) % (a / b) where b divides a."""
    if not isinstance(e, IOp):
        return e
    a, b = _exact(e.a), _exact(e.b)
    out = e if a is e.a and b is e.b else iop(e.op, a, b)
    inner = isinstance(a, IOp) and a.op == "%" and isinstance(a.b, Const) and type(a.b.value) is int
    if out.op in ("%", "//") and isinstance(b, Const) and type(b.value) is int and b.value > 0 and inner:
        assert isinstance(a, IOp) and isinstance(a.b, Const)
        if out.op == "%" and a.b.value % b.value == 0:
            return _exact(iop("%", a.a, b))
        if out.op == "//" and a.b.value % b.value == 0:  # (x % (d*m)) // d -> (x // d) % m
            return iop("%", iop("//", a.a, b), ic(a.b.value // b.value))
    if out.op == "+":
        terms, const = _linear(out)
        joined = _rejoin(terms, exact=True)
        if joined != terms:
            return _build(joined, const)
    return out


class _Flat(Rewrite):
    """Each load's index with digit variables spelled over their flat index, as one index over the
    buffer's elements where the digits joined back (no digit left in it)."""

    def __init__(self, digits: dict[str, Expr]) -> None:
        super().__init__()
        self.digits = digits

    def _spelled(self, e: Expr) -> Expr:
        if isinstance(e, Var) and e.name in self.digits:
            return self.digits[e.name]
        if isinstance(e, IOp):
            return iop(e.op, self._spelled(e.a), self._spelled(e.b))
        return e

    def _go(self, e: Expr) -> Expr:
        e = self.rebuild(e)
        if not isinstance(e, Load) or not any(free_vars(x) & self.digits.keys() for x in e.index):
            return e
        flat: Expr = ic(0)  # over the buffer's elements: digits of one index may span several dimensions
        for x, st in zip(e.index, e.buf.strides()):
            flat = iop("+", flat, iop("*", self._spelled(x), ic(st)))
        flat = _exact(flat)
        if _digit_left(flat, self.digits):
            return e
        return replace(e, buf=replace(e.buf, shape=(e.buf.numel,)), index=(flat,))


def _digit_left(e: Expr, digits: dict[str, Expr]) -> bool:
    spelled = set(digits.values())
    return any(x in spelled or isinstance(x, Var) and x.name in digits for x in walk(e))


def flat_loads(e: Expr, digits: dict[str, Expr]) -> Expr:
    """`e` with its loads' indices over the flat indices where `digits` (variable name -> its digit of a
    flat index, say c1 -> (m // 512) % 8) join back: a GEMM template's operand whose row or column is
    the output's decomposed back into one index, so Triton sees its contiguity (an index left in digits
    ran a bf16 GEMM 8.5x slower on an H200: 170 us against 20)."""
    return _Flat(digits)(e)


def digits_of(names: list[tuple[str, int]], flat: Var) -> dict[str, Expr]:
    """Each variable (name, extent), row-major, as its digit of `flat` (what a template's decode binds)."""
    out: dict[str, Expr] = {}
    stride = 1
    for name, ext in reversed(names):
        out[name] = iop("%", iop("//", flat, ic(stride)), ic(ext))
        stride *= ext
    return out


class _Chunked(Rewrite):
    def __init__(self, v: Var, start: Var, chunk: int) -> None:
        super().__init__()
        self.v, self.start, self.chunk = v, start, chunk

    def _go(self, e: Expr) -> Expr:
        if not (isinstance(e, IOp) and e.op in ("%", "//") and isinstance(e.b, Const) and type(e.b.value) is int
                and e.b.value > 0 and e.b.value % self.chunk == 0):
            return self.rebuild(e)
        terms, const = _linear(e.a)
        # non-negative terms only: C's remainder of a negative start would differ from the floor one
        if terms.get(self.v) != 1 or const % self.chunk or not _nonneg(terms, const) or any(
                a != self.v and (c % self.chunk or self.v.name in free_vars(a)) for a, c in terms.items()):
            return self.rebuild(e)
        at_start = _build({**terms, self.v: 0, self.start: 1}, const)
        if e.op == "//":  # the same quotient across the chunk
            return iop("//", at_start, e.b)
        return iop("+", iop("%", at_start, e.b), iop("-", self.v, self.start))


def chunked(e: Expr, v: Var, start: Var, chunk: int) -> Expr:
    """`e` inside a chunk of `v` (v from `start`, a multiple of `chunk`, up to `chunk` steps on): each
    `(v + rest) % K` and `(v + rest) // K` whose K and rest's terms are multiples of `chunk` is read off the
    chunk's start, as `(start + rest) % K + (v - start)` and `(start + rest) // K`: exact (the chunk never
    crosses a multiple of K), and the per-lane remainder (a broadcast operand of a flattened loss, read at
    `r % 4096`: 0.25x torch.compile) becomes a contiguous run the compiler vectorises."""
    return _Chunked(v, start, chunk)(e)
