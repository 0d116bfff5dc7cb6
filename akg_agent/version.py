"""akg's version (a module of its own: the package imports modules that need it), and a stamp of the
source that writes modules: a cache of written modules keyed by the version alone would serve modules an
older checkout wrote after a `git pull` (same version, other passes)."""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

__version__ = "0.1.0"

_WRITERS = ("akg_agent", "ir", "dsl_backends", "hardware_models")


@functools.cache
def source_stamp() -> str:
    """A hash of the Python source of the packages that lift, plan and write a module (read once per process,
    a few milliseconds)."""
    return stamp_of(Path(__file__).resolve().parent.parent)


def stamp_of(root: Path) -> str:
    h = hashlib.sha256()
    for pkg in _WRITERS:
        for f in sorted((root / pkg).rglob("*.py")):
            h.update(str(f.relative_to(root)).encode())
            h.update(f.read_bytes())
    return h.hexdigest()[:16]
