"""`akg bench` as `akg translate` (`akg_agent.library_check`): a problem the bench translated whose module
ran slower than eager beyond noise gets the module with every op family it generated left to torch,
benched the same way; the faster is the problem's solution, and both times go to the tuning database."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from akg_agent.library_check import SLOWER, alternative_for, note, record
from akg_agent.translate import build, measured_as, render
from hardware_models.spec import HardwareModel
from ir.errors import AkgError

from .metrics import slower_beyond_noise


def _relative(rec: dict[str, Any]) -> float | None:
    s = rec.get("speedup", {}).get("eager") if rec.get("correct") else None
    return 1 / s if s else None


def library_measured(p: Path, dsl: str, target: HardwareModel, solution: Path, rec: dict[str, Any],
                     bench: Callable[[Path], dict[str, Any]]) -> dict[str, Any]:
    """`rec` (the bench's row for `solution`), or the library alternative's row where it ran faster (its
    module then replaces `solution`); `bench` runs a module as the bench ran `solution`."""
    mine = _relative(rec)
    if mine is None or mine * SLOWER <= 1 or not slower_beyond_noise([rec], "eager"):
        return rec
    try:
        t = build(p, dsl, target)  # what translate wrote `solution` from
        alt_s = alternative_for(t)
        if alt_s is None:
            return rec
        alt = build(p, dsl, target, rows=alt_s.rows, conv=alt_s.conv, library=alt_s.library)
        src = render(alt)
    except AkgError:
        return rec
    with tempfile.TemporaryDirectory(prefix="akg-bench-") as d:
        path = Path(d) / p.name
        path.write_text(src)
        alt_rec = bench(path)
    theirs = _relative(alt_rec)
    eager = rec.get("baseline_ms", {}).get("eager")
    record(t, alt, (mine, theirs), eager / 1e3 if eager else None,
           (rec.get("reason", ""), alt_rec.get("reason", "")), measured_as)
    measured = {"generated_x_eager_time": mine, "library_x_eager_time": theirs, "library": list(alt_s.library)}
    if theirs is None or theirs >= mine:
        return {**rec, "library_measured": {**measured, "kept": "generated"}}
    alt.notes.append(note(mine, theirs, "+".join(alt_s.library), "the library's kept"))
    solution.write_text(render(alt))
    return {**alt_rec, "solution": str(solution), "library_measured": {**measured, "kept": "library"}}
