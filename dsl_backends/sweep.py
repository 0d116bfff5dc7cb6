"""A row-fused ("rownorm") kernel's body in the C-style renderers: the row's reductions, its sibling
outputs, then the sweep over its columns (a flat loop, or one segment of the last column coordinate at a
time where a value read in the sweep would otherwise be gathered per element)."""

from __future__ import annotations

from dataclasses import dataclass

from ir.kernel.analysis import online_pairs
from ir.kernel.ir import Kernel, Load, Op, Reduce, children, free_vars
from ir.kernel.siblings import row_vars

from .cstyle import CPrinter, CStyle, decode


@dataclass(frozen=True)
class Sweep:
    """How a row's columns are swept. `pragma`: the line before the column loop. `hoist`: the values of
    the row alone (the log of a log-softmax's sum, say) computed before the loop, not per column (a
    compiler keeps a math call that may set errno inside it). `store_to`: where each output's value goes
    in place of its element of `out`. `once`: the condition of the one thread that stores the sibling
    outputs. `segment`: the loop covers columns from `segment` on that share every column coordinate but
    the last (see `segmented_columns`): those are decoded once from it, before the loop, and the last one
    counts on from its value there."""

    pragma: str = ""
    hoist: bool = False
    store_to: str | None = None
    once: str = ""
    segment: str = ""


PLAIN = Sweep()


def row_sweep(style: CStyle, k: Kernel, p: CPrinter, cols: list[tuple[str, int]], col_loop: str,
              how: Sweep = PLAIN) -> list[str]:
    """A row-fused kernel's body after its row coordinates are decoded in `p`: the row's reductions
    once (innermost first), its sibling outputs (`k.also`, a value per row), then `col_loop` (a loop
    header over akg_col) writing each output, as `how` says."""
    pragma, hoist, store_to, once, segment = how.pragma, how.hoist, how.store_to, how.once, how.segment
    reds = list(dict.fromkeys(k.reductions()))
    for m, s in online_pairs(reds):
        if id(m) not in p.names:
            p.online(m, s)
    for r in reds:
        p(r)
    rows = row_vars(k)
    for b, e in k.also:  # at the row's place in the sibling's buffer (its columns are size 1)
        at = " + ".join(f"{p.env[v.name]} * {st}" for v, st in zip(k.coords, b.strides()) if v in rows)
        value = style.store(b.dtype, p(e))
        p.emit(f"{f'if ({once}) ' if once else ''}{b.name}[{at or '0'}] = {value};")
    if hoist:  # the output's own values, not those inside a reduction (printed in its loop already)
        bound, memo, seen, stack = set(p.env), {}, set(), [k.expr]
        while stack:
            x = stack.pop()
            if id(x) in seen or isinstance(x, Reduce):
                continue
            seen.add(id(x))
            if isinstance(x, (Op, Load)) and free_vars(x, memo) <= bound:
                p(x)  # prints its operands first
            else:
                stack.extend(children(x))
    head = p
    if segment:  # the leading columns fixed over the loop: decoded once, before it
        last, n_last = cols[-1]
        head = p.scope(dict(p.env), p.indent)
        decode(cols[:-1], f"({segment} / {n_last})", head)
        head.emit(f"const int64_t akg_first = {segment} % {n_last} - {segment};")
    col_loop, inner = head.column_loop(cols, col_loop, p.indent + "    ")
    inner.names, inner.fixed, inner.counter = dict(head.names), p.fixed, p.counter
    if segment:
        inner.env[last] = last
        inner.emit(f"const int64_t {last} = akg_first + akg_col;")
    else:
        decode(cols, "akg_col", inner)
    val = inner(k.expr)
    flat = " + ".join(f"{inner.env[v.name]} * {st}" if st != 1 else inner.env[v.name]
                      for v, st in zip(k.coords, k.out.strides())) or "0"
    return p.lines + (head.lines if segment else []) + [p.indent + ln for ln in (pragma, col_loop) if ln] \
        + inner.lines + [f"{inner.indent}{store_to or f'out[{flat}]'} = {style.store(k.out.dtype, val)};",
                         p.indent + "}"]


def segmented_columns(k: Kernel, cols: list[tuple[str, int]], block: int) -> bool:
    """Whether a row kernel's sweep should run in segments of its last column coordinate (each segment's
    other column coordinates fixed): a value read in the sweep depends on a leading column coordinate and
    not on the last (a group norm's per-channel weight in the group's [C/G, H*W] columns), which a flat
    loop over the columns would gather per element. `block`: the sweep's block of columns (a streamed
    store's), which must not straddle two segments."""
    if len(cols) < 2 or cols[-1][1] % block:
        return False
    lead, last = {c for c, _ in cols[:-1]}, cols[-1][0]
    memo: dict[int, frozenset[str]] = {}
    stack, seen = [k.expr], set()
    while stack:
        x = stack.pop()
        if id(x) in seen or isinstance(x, Reduce):
            continue
        seen.add(id(x))
        if isinstance(x, Load) and (fv := free_vars(x, memo)) & lead and last not in fv:
            return True
        stack.extend(children(x))
    return False
