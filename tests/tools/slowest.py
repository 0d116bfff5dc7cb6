"""`tests/slowest.txt` from a `pytest --durations=0` log: each test's seconds (setup and call) where
they reach a floor, slowest first. `make test` starts these first (`conftest.py`).

    python -m tests.tools.slowest LOG [--floor 8]
"""

from __future__ import annotations

import argparse
import re
from collections import defaultdict
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "slowest.txt"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("log")
    ap.add_argument("--floor", type=float, default=8.0)
    a = ap.parse_args()
    seconds: dict[str, float] = defaultdict(float)
    for m in re.finditer(r"^([0-9.]+)s (?:call|setup)\s+(\S+)$", Path(a.log).read_text(), re.M):
        seconds[m.group(2)] += float(m.group(1))
    rows = sorted(((s, t) for t, s in seconds.items() if s >= a.floor), reverse=True)
    OUT.write_text("# seconds test (setup and call, one run of make test); refresh: python -m tests.tools.slowest LOG\n"
                   + "".join(f"{s:.0f} {t}\n" for s, t in rows))


if __name__ == "__main__":
    main()
