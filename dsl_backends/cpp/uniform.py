"""A pointwise `where(c, a, b)` whose one arm calls vector math and the other does not (ELU, SELU, CELU:
`x > 0 ? x : expm1(x)`): a vectorised select computes both arms for every value, where torch's kernels
skip the costly one for a vector whose lanes all take the other. Here per block of `BLOCK` values the
condition is tested first, and a block that takes the cheap arm throughout never calls the math."""

from __future__ import annotations

from ir.kernel.ir import Expr, Kernel, Op, walk
from ir.kernel.schedule import Schedule

from ..cstyle import CPrinter, decode
from .style import STYLE, VECTOR_MATH, omp

BLOCK = 64  # values per test: eight AVX2 vectors, one cache line of conditions is cheap beside a math call


def _heavy(e: Expr) -> bool:
    return any(isinstance(x, Op) and x.op in VECTOR_MATH for x in walk(e))


def uniform_select(k: Kernel) -> tuple[Expr, Expr, bool] | None:
    """(condition, cheap arm, whether the condition picks it) where `k` qualifies, else None."""
    e = k.expr
    if k.kind != "pointwise" or k.also or not (isinstance(e, Op) and e.op == "where") or len(e.args) != 3:
        return None
    c, a, b = e.args
    if _heavy(c) or _heavy(a) == _heavy(b):
        return None
    return (c, b, False) if _heavy(a) else (c, a, True)


def render_uniform(k: Kernel, s: Schedule, parts: tuple[Expr, Expr, bool]) -> list[str]:
    """The flat loop over `k`'s outputs in blocks: the condition over the block, then the cheap arm alone
    where every value takes it, else the whole select."""
    cond, cheap, picks = parts
    n = k.out.numel

    def sweep(value: Expr | None, store: bool) -> list[str]:
        p = CPrinter(STYLE, {}, indent="            ")
        p.identity = (tuple(v.name for v in k.coords), k.out.shape, "akg_i")
        decode([(v.name, v.extent) for v in k.coords], "akg_i", p)
        if value is None:  # the test: every value takes the cheap arm
            c = p(cond)
            last = f"akg_all &= (int)({c if picks else f'!({c})'});"
        else:
            last = f"out[akg_i] = {STYLE.store(k.out.dtype, p(value))};"
        head = "#pragma omp simd" + ("" if store else " reduction(&:akg_all)")
        return [f"        {head}", "        for (int64_t akg_i = akg_b; akg_i < akg_e; ++akg_i) {",
                *p.lines, f"            {last}", "        }"]

    cheap_sweep, full_sweep = (["    " + ln for ln in sweep(v, True)] for v in (cheap, k.expr))
    return [omp(s), f"    for (int64_t akg_b = 0; akg_b < {n}; akg_b += {BLOCK}) {{",
            f"        const int64_t akg_e = akg_b + {BLOCK} < {n} ? akg_b + {BLOCK} : {n};",
            "        int akg_all = 1;", *sweep(None, False),
            "        if (akg_all) {", *cheap_sweep, "        } else {", *full_sweep, "        }", "    }"]
