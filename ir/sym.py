"""Sizes known only at run time (`akg translate --dynamic`).

A `Dyn` is an int whose value is the size the program was traced at and whose `expr` is a polynomial
in run-time size symbols (`akg_n_batch * 4096`). Building a kernel decides with the value (tile sizes,
cost, which path): a module is built for sizes from 1 to the traced size, and decisions that stay
true for every smaller size (fits in one tile, needs a loop) are safe across that envelope. Generated
code gets the expression (`str`, `repr` and f-strings render it), so index arithmetic, masks, loop
bounds and grids follow the size of each call. A decision that does not carry over to smaller sizes
(whether a size is a multiple of a tile) raises `DynamicDecision` instead of baking the traced value.
"""

from __future__ import annotations

import contextlib
import re
import threading
from collections.abc import Iterator
from typing import Any

from .errors import AkgError

# monomial (sorted atom names) -> coefficient; the empty monomial is the constant term
Poly = tuple[tuple[tuple[str, ...], int], ...]

_TLS = threading.local()
PREFIX = "akg_n_"


class DynamicDecision(AkgError):
    """Building code asked a question of a run-time size whose answer the traced size cannot give."""


@contextlib.contextmanager
def _setting(name: str, value: Any) -> Iterator[None]:
    """A per-thread setting for the duration of a block (rendering syntax, inference mode)."""
    prev = getattr(_TLS, name, None)
    setattr(_TLS, name, value)
    try:
        yield
    finally:
        setattr(_TLS, name, prev)


def c_syntax() -> contextlib.AbstractContextManager[None]:
    """Render run-time sizes in C syntax (`/` for floor division of non-negative sizes) while rendering
    C-family sources; Python syntax (`//`) otherwise."""
    return _setting("c", True)


class Dyn(int):
    poly: Poly
    atoms: dict[str, tuple[str, str, bool]]  # opaque atom name -> (python form, C form, decidable)

    def __new__(cls, value: int, poly: Poly, atoms: dict[str, tuple[str, str, bool]]) -> Dyn:
        self = super().__new__(cls, value)
        self.poly = poly
        self.atoms = atoms
        return self

    # --- rendering
    def render(self, c: bool) -> str:
        terms = []
        for mono, coef in self.poly:
            parts = [_atom_text(a, self.atoms, c) for a in mono]
            if coef != 1 or not parts:
                parts.insert(0, str(coef))
            terms.append(" * ".join(parts))
        body = " + ".join(terms).replace("+ -", "- ")
        return body if len(self.poly) == 1 and len(self.poly[0][0]) <= 1 and self.poly[0][1] == 1 else f"({body})"

    def __str__(self) -> str:
        return self.render(bool(getattr(_TLS, "c", False)))

    __repr__ = __str__

    def __format__(self, spec: str) -> str:
        if spec in ("", "d", "s"):
            return str(self)
        raise DynamicDecision(f"a run-time size ({self}) was formatted as {spec!r}")

    @property
    def symbols(self) -> set[str]:
        out: set[str] = set()
        for mono, _ in self.poly:
            for a in mono:
                out |= _symbols_of(a, self.atoms)
        return out

    # --- arithmetic (stays symbolic)
    def __add__(self, o: Any) -> Any:
        return _combine(self, o, "+") if isinstance(o, int) else int(self) + o

    __radd__ = __add__

    def __sub__(self, o: Any) -> Any:
        return _combine(self, -1 * o, "+") if isinstance(o, int) else int(self) - o

    def __rsub__(self, o: Any) -> Any:
        return _combine(-1 * self, o, "+") if isinstance(o, int) else o - int(self)

    def __mul__(self, o: Any) -> Any:
        return _combine(self, o, "*") if isinstance(o, int) else int(self) * o

    __rmul__ = __mul__

    def __neg__(self) -> Any:
        return _combine(self, -1, "*")

    def __pos__(self) -> Dyn:
        return self

    def __floordiv__(self, o: Any) -> Any:
        return _divide(self, o, "//") if isinstance(o, int) else int(self) // o

    def __rfloordiv__(self, o: Any) -> Any:
        return _divide(o, self, "//") if isinstance(o, int) else o // int(self)

    def __mod__(self, o: Any) -> Any:
        return _divide(self, o, "%") if isinstance(o, int) else int(self) % o

    def __rmod__(self, o: Any) -> Any:
        return _divide(o, self, "%") if isinstance(o, int) else o % int(self)

    # --- questions: answered by the traced size unless no single size can answer them
    def _decidable(self) -> int:
        bad = [a for m, _ in self.poly for a in m if a in self.atoms and not self.atoms[a][2]]
        if bad:
            raise DynamicDecision(f"building code asked whether {self} (traced as {int(self)}) is zero or how it "
                                  "compares: the answer changes with the run-time size; this path cannot take "
                                  "--dynamic sizes")
        return int(self)

    def __eq__(self, o: object) -> bool:
        if isinstance(o, Dyn):
            return self.poly == o.poly
        return self._decidable() == o  # decided at the traced size, like every other question

    def __ne__(self, o: object) -> bool:
        return not self.__eq__(o)

    def __hash__(self) -> int:
        # deliberately not int's hash: a question (`n == 64`) is answered at the traced size, but as a
        # key (caches, CSE) a run-time size must never meet the constant that happens to equal it
        return hash(("akg.Dyn", self.poly))

    def __bool__(self) -> bool:
        return self._decidable() != 0

    def __lt__(self, o: Any) -> bool:
        return self._decidable() < int(o)

    def __le__(self, o: Any) -> bool:
        return self._decidable() <= int(o)

    def __gt__(self, o: Any) -> bool:
        return self._decidable() > int(o)

    def __ge__(self, o: Any) -> bool:
        return self._decidable() >= int(o)

    def __reduce__(self) -> Any:  # pickled (sent to workers) as the symbolic value it is
        return (Dyn, (int(self), self.poly, self.atoms))


def _atom_text(a: str, atoms: dict[str, tuple[str, str, bool]], c: bool) -> str:
    if a in atoms:
        return atoms[a][1] if c else atoms[a][0]
    return a


def _symbols_of(a: str, atoms: dict[str, tuple[str, str, bool]]) -> set[str]:
    if a not in atoms:
        return {a}
    return set(re.findall(PREFIX + r"\w+", atoms[a][0]))


TRACED: dict[str, int] = {}  # symbol -> the size it was traced at (a symbol's value is its traced size)


def symbol(name: str, value: int) -> Dyn:
    """The run-time size called `name` (an identifier), traced at `value`."""
    TRACED[PREFIX + name] = value
    return Dyn(value, (((PREFIX + name,), 1),), {})


def is_dynamic(x: Any) -> bool:
    return isinstance(x, Dyn)


def _poly(x: int) -> tuple[Poly, dict[str, tuple[str, str, bool]]]:
    if isinstance(x, Dyn):
        return x.poly, x.atoms
    return ((((), int(x)),) if int(x) else ()), {}


def _make(value: int, terms: dict[tuple[str, ...], int], atoms: dict[str, tuple[str, str, bool]]) -> int:
    poly = tuple(sorted((m, c) for m, c in terms.items() if c))
    if all(not m for m, _ in poly):
        return value
    return Dyn(value, poly, atoms)


def _combine(a: int, b: int, op: str) -> int:
    pa, aa = _poly(a)
    pb, ab = _poly(b)
    atoms = {**aa, **ab}
    terms: dict[tuple[str, ...], int] = {}
    if op == "+":
        for m, c in pa + pb:
            terms[m] = terms.get(m, 0) + c
        return _make(int(a) + int(b), terms, atoms)
    for ma, ca in pa:
        for mb, cb in pb:
            m = tuple(sorted(ma + mb))
            terms[m] = terms.get(m, 0) + ca * cb
    return _make(int(a) * int(b), terms, atoms)


def _divide(a: int, b: int, op: str) -> int:
    value = int(a) // int(b) if op == "//" else int(a) % int(b)
    if not isinstance(b, Dyn) and int(b) > 0:
        pa, aa = _poly(a)
        if all(c % int(b) == 0 for _, c in pa):  # exact: divide every coefficient
            return 0 if op == "%" else _make(value, {m: c // int(b) for m, c in pa}, aa)
        if op == "//" and int(b) == 1:
            return a
        if op == "//" and all(c <= 0 for _, c in pa):  # floor(-x / b) = -ceil(x / b): C's `/` truncates
            return -1 * _divide(-1 * a + (int(b) - 1), b, "//")
    def text(x: int, c: bool) -> str:
        return x.render(c) if isinstance(x, Dyn) else str(int(x))
    py = f"({text(a, False)} // {text(b, False)})" if op == "//" else f"({text(a, False)} % {text(b, False)})"
    cc = f"({text(a, True)} / {text(b, True)})" if op == "//" else f"({text(a, True)} % {text(b, True)})"
    atoms = {**_poly(a)[1], **_poly(b)[1]}
    name = py  # an opaque atom is known by its own text (unique, and the same in every process)
    atoms[name] = (py, cc, op == "//")  # a quotient grows with the size; a remainder does not
    return Dyn(value, (((name,), 1),), atoms)


def size(d: Any, names: dict[str, str] | None = None) -> int:
    """A torch size (an int or a SymInt from torch.export with dynamic dimensions) as an int or Dyn;
    `names` maps torch's symbols (s0, s1, ...) to akg's size names."""
    if isinstance(d, int) and not isinstance(d, bool):
        return d
    node = getattr(d, "node", None)
    if node is None:
        return int(d)
    expr = node.expr
    if expr.is_number:
        return int(expr)
    return _from_sympy(expr, node.shape_env, names or getattr(_TLS, "names", None) or {})


def keep_symints() -> contextlib.AbstractContextManager[None]:
    """Inside symbolic type inference: attributes an evaluation builds keep torch's SymInts."""
    return _setting("keep", True)


def keeping_symints() -> bool:
    return bool(getattr(_TLS, "keep", False))


def symbol_names(names: dict[str, str]) -> contextlib.AbstractContextManager[None]:
    """While lifting: torch's size symbols (s0, ...) -> akg's size names."""
    return _setting("names", names)


def _from_sympy(e: Any, env: Any, names: dict[str, str]) -> int:
    import sympy
    if e.is_Integer:
        return int(e)
    if e.is_Symbol:
        name = names.get(str(e))
        if name is None:
            raise AkgError(f"a size the program computes ({e}) is not one of the --dynamic dimensions; "
                           "name it in --dynamic or leave it static")
        hint = getattr(env, "guarding_hint_or_throw", None) or env.size_hint  # torch 2.11 has size_hint only
        return symbol(name, int(hint(e)))
    args = [_from_sympy(a, env, names) for a in e.args]
    if isinstance(e, sympy.Add):
        out = args[0]
        for a in args[1:]:
            out = out + a
        return out
    if isinstance(e, sympy.Mul):
        out = args[0]
        for a in args[1:]:
            out = out * a
        return out
    fn = type(e).__name__
    if fn == "FloorDiv":
        return args[0] // args[1]
    if fn in ("Mod", "PythonMod"):
        return args[0] % args[1]
    if fn == "CeilDiv" or fn == "CeilToInt":
        return -((-args[0]) // args[1])
    raise AkgError(f"a run-time size computed as {fn}({', '.join(map(str, e.args))}) is not supported by --dynamic")
