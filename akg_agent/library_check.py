"""Generated against library, measured once where the untuned plan lost to eager: the cost model cannot
tell them apart everywhere (an attention of 64 keys on a host without AVX-512 ran 1.5x slower generated
than torch's flash kernel, which the model priced the other way). A translate whose timed module runs
slower than eager beyond noise writes the module again with every op family the backend generated left
to torch (their prologues and epilogues still generated), times it, keeps the faster, and records both in
the tuning database: the next translate of the same problem reads the choice instead of measuring."""

from __future__ import annotations

from collections.abc import Callable

from dsl_backends import get_backend
from ir.errors import AkgError

from .strategy import Strategy
from .translation import Translation
from .tuning_db import TuningDB, hardware_key, problem_signature, versions
from .verifier.plausibility import speedup

SLOWER = 0.95  # a module below this fraction of eager's speed lost beyond the timing's noise


def families(t: Translation) -> list[str]:
    """The op families of this program a strategy may leave to the library (those the backend generates)."""
    kinds = get_backend(t.dsl).manifest.kinds
    generated_only = {"window": "window" in kinds, "scan": "scan" in kinds}  # otherwise already the library's
    return [f for f in t.graph.meta.get("library_families", ()) if generated_only.get(f, True)]


def _relative(t: Translation) -> float | None:
    """The module's time over eager's in its own run (the runs are minutes apart on a shared host)."""
    s = speedup(t.verdict.details) if t.verdict is not None and t.verdict.accepted else None
    return 1 / s if s else None


def alternative_for(t: Translation) -> Strategy | None:
    """`t`'s strategy with every family it generates left to torch, where there is one and the database
    chose nothing for `t`; else None."""
    extra = [f for f in families(t) if f not in t.strategy.library]
    if not extra or t.strategy_s is not None:
        return None
    return Strategy(t.strategy.rows, t.strategy.conv, tuple(t.strategy.library) + tuple(extra))


def library_alternative(t: Translation) -> Strategy | None:
    """`alternative_for(t)` where `t`'s timed verdict lost to eager beyond noise; else None."""
    mine = _relative(t)
    return None if mine is None or mine * SLOWER <= 1 else alternative_for(t)


def record(t: Translation, alt: Translation, rels: tuple[float | None, float | None], eager_s: float | None,
           verdicts: tuple[str, str], measured_as: Callable[[Translation], dict]) -> None:
    """Both modules' times (`rels`: over eager's in their own runs) in the tuning database, at the first run's
    eager pace as a tune stores them (keyed by `measured_as`, `tune`'s key of a module): the next translate
    of the problem takes the faster's strategy."""
    db = TuningDB()
    hw, dsl = hardware_key(t.target), t.dsl
    prob, ver = problem_signature(t.problem), versions(get_backend(dsl).manifest)
    for x, rel, line in ((t, rels[0], verdicts[0]), (alt, rels[1], verdicts[1])):
        db.put_strategy(hw, dsl, prob, ver, measured_as(x), rel * eager_s if rel and eager_s else float("inf"), line)


def note(mine: float | None, theirs: float | None, extra: str, kept: str) -> str:
    """The header's line of what was measured (`mine`, `theirs`: the two modules' times over eager's)."""
    generated = f"generated {mine:.2f}x eager's time" if mine else "generated"
    library = "not timed" if theirs is None else f"{theirs:.2f}x with {extra} left to torch"
    return f"measured library against generated: {generated}, {library}: {kept}"


def choose(t: Translation, alt: Translation, measured_as: Callable[[Translation], dict]) -> Translation:
    """The faster of `t` and `alt` (each timed against eager in its own run), both recorded in the tuning
    database (keyed by `measured_as`, `tune`'s key of a module); the choice noted on it."""
    mine, theirs = _relative(t), _relative(alt)
    eager = ((t.verdict.details if t.verdict else {}).get("timing", {}).get("eager") or {}).get("median_s")
    record(t, alt, (mine, theirs), eager, tuple(x.verdict.line() if x.verdict is not None else "not verified"
                                                 for x in (t, alt)), measured_as)  # type: ignore[arg-type]
    extra = "+".join(f for f in alt.strategy.library if f not in t.strategy.library)
    if theirs is None or mine is None or theirs >= mine:
        line = note(mine, theirs, extra, "generated kept")
        if alt.verdict is not None and not alt.verdict.accepted:  # the rejection says more than "not timed"
            line = line.replace("not timed", alt.verdict.reason)
        t.notes.append(line)
        return t
    line = note(mine, theirs, extra, "the library's kept (the tuning database keeps both)")
    alt.notes += [*t.notes, line]
    t.notes.append(line)
    return alt


def measured_choice(t: Translation, build_with: Callable[[Strategy], Translation],
                    verify: Callable[[Translation], None], measured_as: Callable[[Translation], dict]) -> Translation:
    """`t`, or the module with its families left to the library where that ran faster; `build_with` plans
    a strategy, `verify` sets a rendered translation's timed verdict."""
    alt_s = library_alternative(t)
    if alt_s is None:
        return t
    try:
        alt = build_with(alt_s)
    except AkgError as e:  # the library cannot take these families here: the generated module stands
        t.notes.append(f"library against generated not measured: {e}")
        return t
    verify(alt)
    return choose(t, alt, measured_as)
