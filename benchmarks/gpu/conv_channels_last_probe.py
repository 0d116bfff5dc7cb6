"""Where torch.compile's convolutions win: the real-size set's first convolution as eager calls it (NCHW),
in channels-last memory with the conversions, and the whole program eager and compiled.

    python benchmarks/gpu/conv_channels_last_probe.py conv2d conv_relu_bias ...   (on a GPU)
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F

SET = Path(__file__).resolve().parents[1] / "realsize" / "gpu"
CL = torch.channels_last


def _time(fn: Callable[[], object], flush: torch.Tensor, n: int = 25) -> float:
    """Median ms over `n` trials, L2 flushed before each, CUDA events."""
    for _ in range(3):
        fn()
    times = []
    for _ in range(n):
        flush.zero_()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b))
    return sorted(times)[n // 2]


def probe(name: str, flush: torch.Tensor) -> str:
    spec = importlib.util.spec_from_file_location(name, SET / f"{name}.py")
    assert spec is not None and spec.loader is not None
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    torch.manual_seed(0)
    model = m.Model(*m.get_init_inputs()).cuda().eval()
    x = m.get_inputs()[0].cuda()
    conv = next(c for c in model.modules() if isinstance(c, (torch.nn.Conv2d, torch.nn.ConvTranspose2d)))
    w, b, wcl, xcl = conv.weight, conv.bias, conv.weight.contiguous(memory_format=CL), x.contiguous(memory_format=CL)
    with torch.no_grad():
        if isinstance(conv, torch.nn.Conv2d):
            def call(a: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
                return F.conv2d(a, k, b, conv.stride, conv.padding, conv.dilation, conv.groups)
        else:
            def call(a: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
                return F.conv_transpose2d(a, k, b, conv.stride, conv.padding, conv.output_padding, conv.groups,
                                          conv.dilation)
        row = {"nchw": _time(lambda: call(x, w), flush),
               "cl_both": _time(lambda: call(x.contiguous(memory_format=CL), wcl).contiguous(), flush),
               "cl_in": _time(lambda: call(x.contiguous(memory_format=CL), wcl), flush),
               "cl_pure": _time(lambda: call(xcl, wcl), flush),
               "cvt": _time(lambda: x.contiguous(memory_format=CL), flush)}
        err = (call(xcl, wcl).contiguous() - call(x, w)).abs().max().item()
        eager = _time(lambda: model(x), flush)
        compiled = torch.compile(model)
        compiled(x)
        torch.cuda.synchronize()
        comp = _time(lambda: compiled(x), flush)
    return (f"{name} {({k: round(v, 3) for k, v in row.items()})} model eager {eager:.3f} compile {comp:.3f} "
            f"cl err {err:.2e}")


def main() -> None:
    torch.backends.cudnn.benchmark = False
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    for name in sys.argv[1:]:
        print(probe(name, flush), flush=True)


if __name__ == "__main__":
    main()
