"""usage: python benchmarks/gpu/attention_module_probe.py [SOLUTIONS_DIR (with cuda-c/, pallas/, triton/)]
Why the CUDA-C/TileLang/Pallas attention modules (eager's own SDPA call) timed 2.8 ms against eager's 2.05:
each contender's kernels (torch.profiler) and CUDA-event times, alone and in turns."""
import importlib.util
import sys

import torch

sys.path.insert(0, ".")


def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


prob = load("benchmarks/realsize/gpu/attention.py", "prob")
ins = [x.cuda() for x in prob.get_inputs()]
eager = prob.Model().cuda()
mods = {"eager": eager}
sols = sys.argv[1] if len(sys.argv) > 1 else "runs/oldsol"
for d in ("cuda-c", "pallas", "triton"):
    m = load(f"{sols}/{d}/attention.py", f"m_{d.replace('-', '_')}")
    mods[d] = m.ModelNew().cuda()
flush = torch.empty(256 << 20, dtype=torch.int8, device="cuda")


def t(f, n=30):
    times = []
    for _ in range(n):
        flush.zero_()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        f(*ins)
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b))
    return sorted(times)[n // 2]


with torch.no_grad():
    for m in mods.values():
        m(*ins)
    torch.cuda.synchronize()
    for rnd in range(2):
        print("round", rnd, {k: round(t(m), 3) for k, m in mods.items()})
    for name, m in mods.items():
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            for _ in range(3):
                m(*ins)
            torch.cuda.synchronize()
        print("==", name)
        print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=6, max_name_column_width=90))
    print("grad mode", torch.is_grad_enabled(), "inputs require grad", [x.requires_grad for x in ins])
