"""The memory a verification holds, estimated from a problem's sizes: it admits `akg bench --jobs` runs
side by side and sets a job's address-space cap (`sandbox.memory_for`).

A verification holds its inputs and outputs, the reference's and the candidate's, and a float64 copy
of the reference's output: measured at about ten times one trial's inputs plus outputs (the
verdict's `peak_over_footprint`); and the weights three times (the reference's, its float64 copy's,
the candidate's)."""

from __future__ import annotations

from pathlib import Path

import torch

from ir.problem import Problem, load_problem

PEAK_FACTOR = 10  # the verifier's peak over one trial's inputs and outputs (see the module's docstring)


def verification_bytes(path: Path | Problem) -> int:
    """The memory a verification of this problem will hold, estimated from its sizes alone (the model
    built and run under a fake-tensor mode: a model of gigabytes takes none); 0 where the estimate fails
    (the problem is then admitted, and its own run reports the failure)."""
    try:
        problem = path if isinstance(path, Problem) else load_problem(path)
        mode, fake = problem.fake_inputs()
        with mode, torch.no_grad():
            model = problem.build_model(0)
            weights = sum(p.numel() * p.element_size() for p in model.state_dict().values())
            out = model(*fake)
        outs = list(out) if isinstance(out, (tuple, list)) else [out]
        trial = sum(t.numel() * t.element_size() for t in [*fake, *outs] if isinstance(t, torch.Tensor))
        return PEAK_FACTOR * trial + 3 * weights  # weights: the reference's, its float64 copy's, the candidate's
    except Exception:  # noqa: BLE001 - any failure here is the problem's own, reported by its run
        return 0
