"""bf16 linear layers at a transformer's sizes (BERT-base: 4096 tokens, 768 <-> 3072 features; and 8192^3) on
an NVIDIA GPU: akg's Triton module as translate writes it (its cost model may leave the GEMM to cuBLAS), and
its GEMM generated under a set of schedules (with `--tma`, TMA descriptors too), against torch's (cuBLAS, its
epilogue a second kernel). Each call is queued behind a GPU sleep, so the time is the GPU's, not the host's:
L2 flushed, CUDA events, median of 30, interleaved.

    python benchmarks/gpu/bf16_linear_schedules.py OUT.json [--tma] [SHAPE ...]
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
from pathlib import Path

import torch
from precision_gemm import load

from ir.kernel.schedule import Schedule

PROBLEM = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear({k}, {n})
        self.to(torch.bfloat16)

    def forward(self, x):
        return {body}


def get_inputs():
    return [torch.randn({m}, {k}, dtype=torch.bfloat16)]


def get_init_inputs():
    return []
'''
SHAPES = {  # name: (M, K, N, epilogue)
    "qkv_768x768": (4096, 768, 768, "self.fc(x)"),
    "ffn_up_gelu_768x3072": (4096, 768, 3072, "F.gelu(self.fc(x))"),
    "ffn_down_3072x768": (4096, 3072, 768, "self.fc(x)"),
    "square_8192": (8192, 8192, 8192, "self.fc(x)"),
    # the model set's other linear layers at 8 x 512 tokens (ViT: 32 x 197)
    "gpt2_attn_768x2304": (4096, 768, 2304, "self.fc(x)"),
    "gpt2_fc_gelu_tanh_768x3072": (4096, 768, 3072, "F.gelu(self.fc(x), approximate='tanh')"),
    "llama_q_1024x1024": (4096, 1024, 1024, "self.fc(x)"),
    "llama_kv_1024x256": (4096, 1024, 256, "self.fc(x)"),
    "llama_gate_silu_1024x2816": (4096, 1024, 2816, "F.silu(self.fc(x))"),
    "llama_down_2816x1024": (4096, 2816, 1024, "self.fc(x)"),
    "vit_up_gelu_768x3072": (6304, 768, 3072, "F.gelu(self.fc(x))"),
    "t5_q_512x512": (4096, 512, 512, "self.fc(x)"),
    "t5_up_relu_512x2048": (4096, 512, 2048, "F.relu(self.fc(x))"),
    "t5_down_2048x512": (4096, 2048, 512, "self.fc(x)"),
}
TILES = [(128, 256, 64, 3, 8), (128, 128, 64, 3, 8), (128, 128, 64, 4, 8), (128, 128, 32, 3, 8),
         (128, 128, 32, 4, 4), (128, 64, 64, 3, 4), (64, 128, 64, 4, 4), (256, 128, 64, 3, 8), (64, 256, 64, 3, 4),
         (128, 128, 32, 2, 8), (128, 256, 32, 2, 8), (64, 128, 64, 3, 4), (64, 64, 64, 4, 4), (128, 64, 64, 4, 4)]


def module(src: str, sched: Schedule | None, d: Path, name: str) -> torch.nn.Module:
    """akg's module for the problem: translate's own (`sched` None), or its GEMM generated under `sched`."""
    prob = d / f"{name}_problem.py"
    prob.write_text(src)
    return load(name, sched, d, prob, "h200")


def warm(fn, x: torch.Tensor):
    for _ in range(3):
        fn(x)
    torch.cuda.synchronize()
    return lambda: fn(x)


def gpu_times(fns: dict, flush: torch.Tensor, turns: int = 30) -> dict[str, float]:
    """Median GPU seconds of each call: L2 flushed, queued behind a GPU sleep, contenders in turns."""
    times: dict[str, list[float]] = {c: [] for c in fns}
    for _ in range(turns):
        for c, f in fns.items():
            flush.zero_()
            torch.cuda._sleep(400_000)  # the host queues the call while the GPU sleeps
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            f()
            e.record()
            torch.cuda.synchronize()
            times[c].append(s.elapsed_time(e) / 1e3)
    return {c: statistics.median(ts) for c, ts in times.items()}


def main(out: str, tma: bool, only: list[str]) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="akg-bf16-linear-"))
    flush = torch.empty(256 * 1024 * 1024 // 4, device="cuda")
    report: dict[str, dict] = {}
    for shape, (m, k, n, body) in SHAPES.items():
        if only and shape not in only:
            continue
        src = PROBLEM.format(m=m, k=k, n=n, body=body)
        ns: dict = {}
        exec(compile(src, shape, "exec"), ns)  # noqa: S102 - our own problem text
        torch.manual_seed(0)
        ref = ns["Model"]().cuda()
        x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        fns, rows = {"torch": warm(ref, x)}, {}
        want = ref(x).float()
        cands: dict[str, Schedule | None] = {"akg_translate": None}
        for bm, bn, bk, st, w in TILES:
            base = Schedule(BM=bm, BN=bn, BK=bk, GROUP_M=8, num_stages=st, num_warps=w)
            cands[f"{bm}x{bn}x{bk}_s{st}_w{w}"] = base
            if tma:
                cands[f"{bm}x{bn}x{bk}_s{st}_w{w}_tma"] = base.replace(TMA=True)
        for name, sched in cands.items():
            try:
                mod = module(src, sched, tmp, f"{shape}_{name}")
                mod.load_state_dict(ref.state_dict(), strict=False)
                got = mod(x).float()
                rows[name] = {"max_abs_err": float((got - want).abs().max())}
                fns[name] = warm(mod, x)
            except Exception as e:  # noqa: BLE001 - a schedule that fails is reported
                rows[name] = {"error": f"{type(e).__name__}: {str(e)[:200]}"}
        times = gpu_times(fns, flush)
        for c, med in times.items():
            rows.setdefault(c, {}).update(median_us=med * 1e6, tflops=2 * m * n * k / med / 1e12)
        report[shape] = rows
        Path(out).write_text(json.dumps({"device": torch.cuda.get_device_name(), "rows": report}, indent=1))
        best = min((c for c in times if c != "torch"), key=lambda c: rows[c]["median_us"])
        us = {c: rows[c]["median_us"] for c in times}
        print(f"{shape}: torch {us['torch']:.1f} us, akg_translate {us.get('akg_translate', float('nan')):.1f}, "
              f"best {best} {us[best]:.1f}", flush=True)
    Path(out).write_text(json.dumps({"device": torch.cuda.get_device_name(), "rows": report}, indent=1))


if __name__ == "__main__":
    main(sys.argv[1], "--tma" in sys.argv[2:], [a for a in sys.argv[2:] if a != "--tma"])
