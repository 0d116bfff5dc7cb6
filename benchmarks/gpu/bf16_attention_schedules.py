"""bf16 attention at the model set's sizes (D = 64: BERT with an additive padding mask, GPT-2 and Llama causal,
ViT unmasked) on an NVIDIA GPU: akg's Triton module as translate writes it, and its attention kernel under a
set of schedules, against torch's scaled_dot_product_attention (flash / cuDNN). GPU time behind a sleep, L2
flushed, CUDA events, median of 30, interleaved (the linear probe's protocol).

    python benchmarks/gpu/bf16_attention_schedules.py OUT.json
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import torch
from bf16_linear_schedules import gpu_times
from precision_gemm import load

from ir.kernel.schedule import Schedule

PROBLEM = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def forward(self, q, k, v, *mask):
        return F.scaled_dot_product_attention(q, k, v, {args})


def get_inputs():
    q = torch.randn({b}, {h}, {n}, {d}, dtype=torch.bfloat16)
    k = torch.randn({b}, {h}, {n}, {d}, dtype=torch.bfloat16)
    v = torch.randn({b}, {h}, {n}, {d}, dtype=torch.bfloat16)
    return [q, k, v]{mask}


def get_init_inputs():
    return []
'''
MASK = " + [torch.where(torch.rand({b}, 1, 1, {n}) < 0.1, -1e4, 0.0).to(torch.bfloat16)]"
SHAPES = {  # name: (batch, heads, tokens, head width, masked, causal)
    "bert_mask_8x12x512": (8, 12, 512, 64, True, False),
    "gpt2_causal_8x12x512": (8, 12, 512, 64, False, True),
    "llama_causal_8x16x512": (8, 16, 512, 64, False, True),
    "vit_32x12x197": (32, 12, 197, 64, False, False),
}
TILES = [(128, 64, 4, 2), (128, 64, 4, 3), (128, 64, 8, 2), (128, 64, 8, 3), (128, 128, 8, 2), (128, 128, 8, 3),
         (64, 64, 4, 3), (64, 128, 4, 3), (128, 32, 4, 3), (64, 32, 4, 2)]


def main(out: str) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="akg-bf16-attn-"))
    flush = torch.empty(256 * 1024 * 1024 // 4, device="cuda")
    report: dict[str, dict] = {}
    for shape, (b, h, n, d, masked, causal) in SHAPES.items():
        args = "attn_mask=mask[0]" if masked else "is_causal=True" if causal else ""
        src = PROBLEM.format(b=b, h=h, n=n, d=d, args=args, mask=MASK.format(b=b, n=n) if masked else "")
        prob = tmp / f"{shape}_problem.py"
        prob.write_text(src)
        ns: dict = {}
        exec(compile(src, shape, "exec"), ns)  # noqa: S102 - our own problem text
        torch.manual_seed(0)
        xs = [x.cuda() for x in ns["get_inputs"]()]
        ref = ns["Model"]().cuda()
        want = ref(*xs).float()
        fns, rows = {"torch": lambda: ref(*xs)}, {}
        cands: dict[str, Schedule | None] = {"akg_translate": None}
        for bm, bn, w, st in TILES:
            cands[f"{bm}x{bn}_w{w}_s{st}"] = Schedule(BM=bm, BN=bn, num_warps=w, num_stages=st)
        for name, sched in cands.items():
            try:
                mod = load(f"{shape}_{name}", sched, tmp, prob, "h200", kind="attention")
                got = mod(*xs).float()
                rows[name] = {"max_abs_err": float((got - want).abs().max())}
                fns[name] = (lambda m: lambda: m(*xs))(mod)
            except Exception as e:  # noqa: BLE001 - a schedule that fails is reported
                rows[name] = {"error": f"{type(e).__name__}: {str(e)[:200]}"}
        for f in fns.values():
            f()
        torch.cuda.synchronize()
        flops = 4 * b * h * n * n * d / (2 if causal else 1)
        for c, med in gpu_times(fns, flush).items():
            rows.setdefault(c, {}).update(median_us=med * 1e6, tflops=flops / med / 1e12)
        report[shape] = rows
        Path(out).write_text(json.dumps({"device": torch.cuda.get_device_name(), "rows": report}, indent=1))
        us = {c: r["median_us"] for c, r in rows.items() if "median_us" in r}
        best = min((c for c in us if c != "torch"), key=us.__getitem__)
        print(f"{shape}: torch {us['torch']:.1f} us, akg_translate {us.get('akg_translate', float('nan')):.1f}, "
              f"best {best} {us[best]:.1f}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
