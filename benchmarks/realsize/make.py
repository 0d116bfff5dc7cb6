"""Writes the real-size set: `gpu/NAME.py` and `cpu/NAME.py` (plus `cpu/NAME_bN.py` at batch 1, 2 and 8
for the small-batch programs) from `programs.py`. Run it after editing the table; the files it
writes are committed, so `akg bench benchmarks/realsize/cpu` works without it."""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))

from programs import PROGRAMS, SMALL_BATCHES, Program  # noqa: E402

TEMPLATE = '''"""{doc} ({sizing}-sized; written by benchmarks/realsize/make.py from programs.py)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
{model}

def get_inputs():
    return {inputs}


def get_init_inputs():
    return {init}
'''


def text(p: Program, sizing: str, sizes: dict[str, int]) -> str:
    model = p.model if "__init__" in p.model else "    def __init__(self):\n        super().__init__()\n\n" + p.model
    return TEMPLATE.format(doc=p.doc.rstrip("."), sizing=sizing, model=model.format(**sizes).rstrip("\n") + "\n",
                           inputs=p.inputs.format(**sizes), init=p.init)


def main() -> None:
    for sizing in ("gpu", "cpu"):
        out = HERE / sizing
        out.mkdir(exist_ok=True)
        for old in out.glob("*.py"):
            old.unlink()
        for p in PROGRAMS:
            (out / f"{p.name}.py").write_text(text(p, sizing, p.sizes[sizing]))
            if sizing == "cpu" and p.small_batch:
                for b in SMALL_BATCHES:
                    (out / f"{p.name}_b{b}.py").write_text(text(p, f"{sizing}, batch {b}", {**p.sizes[sizing], "B": b}))
    print(f"{len(PROGRAMS)} programs; gpu/: {len(list((HERE / 'gpu').glob('*.py')))} files, "
          f"cpu/: {len(list((HERE / 'cpu').glob('*.py')))} files")


if __name__ == "__main__":
    main()
