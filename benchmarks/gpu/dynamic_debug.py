"""Runs one --dynamic module at several batch sizes against the reference on the GPU, twice over
differently filled memory, and prints each output's error (a debugging aid for `--dynamic` on a GPU)."""
import importlib.util
import sys

import torch

from akg_agent.translate import build, render
from ir.problem import load_problem

problem, dsl, spec = sys.argv[1], sys.argv[2], sys.argv[3]
t = build(problem, dsl, "h100", dynamic=spec)
path = f"/tmp/dyn_{dsl}.py"
open(path, "w").write(render(t))
spec_ = importlib.util.spec_from_file_location("m", path)
mod = importlib.util.module_from_spec(spec_)
spec_.loader.exec_module(mod)
p = load_problem(problem)
ref, cand = p.build_model(0).cuda().eval(), mod.ModelNew().cuda()
cand.load_state_dict(ref.state_dict())
for n in [int(x) for x in sys.argv[4:]]:
    xs = [torch.randn(n, *x.shape[1:], device="cuda") if isinstance(x, torch.Tensor) else x for x in p.make_inputs(0)]
    want = ref(*xs)
    want = want if isinstance(want, tuple) else (want,)
    for fill in (float("nan"), 7.0):
        junk = torch.full((1 << 24,), fill, device="cuda")
        del junk
        got = cand(*xs)
        got = got if isinstance(got, tuple) else (got,)
        torch.cuda.synchronize()
        print(n, fill, [f"{(a - b).abs().max().item():.3g}" for a, b in zip(got, want)], flush=True)
