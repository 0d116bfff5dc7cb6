"""Generated C++ convolutions (conv=generated, the implicit GEMM) read a block of output positions whose
windows lie inside the input in place: the register tile loads x at a row offset plus a K offset, no packed
panel; blocks at the padding pack as before (rows inside it without masks). Verified natively."""

from __future__ import annotations

import pytest

from akg_agent.translate import build, render
from akg_agent.verifier import verify

SRC = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.{conv}

    def forward(self, x):
        return torch.relu(self.conv(x)) * 0.5


def get_inputs():
    return [torch.randn{shape}]


def get_init_inputs():
    return []
'''

CASES = {  # (module, input shape, read in place, padded; None: not asserted)
    "padded-3x3": ("Conv2d(5, 40, 3, padding=1)", (2, 5, 13, 17), True, True),  # 40 columns: a tail of 8
    "stride-dilation": ("Conv2d(4, 33, 3, stride=2, padding=2, dilation=2)", (3, 4, 15, 11), True, True),
    "conv1d": ("Conv1d(6, 20, 5, padding=2)", (3, 6, 50), True, True),
    "no-padding": ("Conv2d(3, 16, (2, 3))", (2, 3, 9, 10), True, False),
    # stride 2: lowered as one implicit GEMM per output phase, each read in place where it can be
    "transposed": ("ConvTranspose2d(4, 8, 3, stride=2, padding=1)", (2, 4, 7, 6), None, None),
}
TILES = {"default": None, "panels": {"MR": 4, "NR": 16, "NB": 32, "KC": 16, "COLS_OUTER": 0}}


@pytest.mark.parametrize("tile", list(TILES))
@pytest.mark.parametrize("case", list(CASES))
def test_generated_convolutions_read_inner_blocks_in_place(case, tile, tmp_path):
    conv, shape, direct, padded = CASES[case]
    path = tmp_path / "p.py"
    path.write_text(SRC.replace("{conv}", conv).replace("{shape}", str(shape)))
    t = build(path, "cpp", "cpu", tuned=False, conv="generated")
    for k in t.program.kernels():
        if k.kind == "matmul" and TILES[tile]:  # K panels (K = channels x taps: no multiple of 16), tails
            t.schedules[k.name] = t.schedules[k.name].replace(**TILES[tile])
    text = render(t)
    if direct is not None:
        assert ("if (akg_direct) {" in text and "akg_ko[akg_k0 + akg_q]]" in text) == direct, text
        assert ("static const unsigned char akg_in0[" in text) == (direct and padded)
    cand = tmp_path / "cand.py"
    cand.write_text(text)
    v = verify(path, cand, target="cpu", seeds=(0, 1))
    assert v.accepted, v.line()


def test_a_padded_windows_row_flags_mark_the_positions_whose_window_stays_inside(tmp_path):
    """3 taps, padding 1 over 13 rows: the first and the last output row reach into the padding."""
    path = tmp_path / "p.py"
    path.write_text(SRC.replace("{conv}", "Conv2d(5, 40, 3, padding=1)").replace("{shape}", "(2, 5, 13, 17)"))
    text = render(build(path, "cpp", "cpu", tuned=False, conv="generated"))
    flags = [ln.split("= {")[1].rstrip("};").split(", ") for ln in text.splitlines() if "unsigned char akg_in" in ln]
    assert ["0"] + ["1"] * 11 + ["0"] in flags and ["0"] + ["1"] * 15 + ["0"] in flags  # rows 13, columns 17


def test_a_plain_gemm_keeps_its_packed_panel(tmp_path):
    path = tmp_path / "p.py"
    path.write_text(SRC.replace("nn.{conv}", "nn.Linear(64, 48)").replace("{shape}", "(24, 64)"))
    text = render(build(path, "cpp", "cpu", tuned=False, pure=True))
    assert "akg_ap[akg_i][akg_q] =" in text and "akg_direct" not in text
