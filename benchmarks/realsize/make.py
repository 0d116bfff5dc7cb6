"""Writes the real-size set: `gpu/NAME.py` and `cpu/NAME.py` (plus `cpu/NAME_bN.py` at batch 1, 2 and 8
for the small-batch programs) from `programs.py`, and the GPU set cast to 16-bit floats, `gpu-bf16/`
and `gpu-fp16/` (parameters, buffers and floating inputs cast, as `model.to(dtype)` does). Run it after
editing the table; the files it writes are committed, so `akg bench benchmarks/realsize/cpu` works
without it."""

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


# A 16-bit variant: the fp32 program's class under another name, cast once built; its inputs cast
# where floating (indices stay integers). Programs already in bf16 follow the variant's dtype.
CAST_TEMPLATE = '''"""{doc} ({sizing}-sized, cast to {dtype}; written by benchmarks/realsize/make.py from
programs.py)."""
import torch
import torch.nn as nn
import torch.nn.functional as F

DTYPE = torch.{dtype}


class Float32Model(nn.Module):
{model}

class Model(Float32Model):
    def __init__(self, *args):
        super().__init__(*args)
        self.to(DTYPE)


def get_inputs():
    return [t.to(DTYPE) if t.is_floating_point() else t for t in {inputs}]


def get_init_inputs():
    return {init}
'''
CASTS = {"gpu-bf16": "bfloat16", "gpu-fp16": "float16"}


def text(p: Program, sizing: str, sizes: dict[str, int], dtype: str | None = None) -> str:
    model = p.model if "__init__" in p.model else "    def __init__(self):\n        super().__init__()\n\n" + p.model
    fields = dict(doc=p.doc.rstrip("."), sizing=sizing, model=model.format(**sizes).rstrip("\n") + "\n",
                  inputs=p.inputs.format(**sizes), init=p.init)
    return TEMPLATE.format(**fields) if dtype is None else CAST_TEMPLATE.format(dtype=dtype, **fields)


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
    for folder, dtype in CASTS.items():
        out = HERE / folder
        out.mkdir(exist_ok=True)
        for old in out.glob("*.py"):
            old.unlink()
        for p in PROGRAMS:
            (out / f"{p.name}.py").write_text(text(p, "gpu", p.sizes["gpu"], dtype))
    print(f"{len(PROGRAMS)} programs; gpu/: {len(list((HERE / 'gpu').glob('*.py')))} files, "
          f"cpu/: {len(list((HERE / 'cpu').glob('*.py')))} files; {', '.join(CASTS)} beside gpu/")


if __name__ == "__main__":
    main()
