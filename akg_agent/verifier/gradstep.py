"""A training step as a module, so a gradient is checked and timed like an output (`verify(..., backward=True)`).

`GradStep(model, names)` returns the model's outputs, then the gradient of every floating-point input, then the
gradient of each parameter the reference trains (by name, in the reference's order), for gradients of the
outputs drawn from a generator seeded with torch's seed of the call: the verifier seeds the reference, its
float64 copy and the candidate alike before each call, so all three are differentiated along the same
direction, new for every trial, without drawing from torch's global generator (a draw there would read as a
forward that samples). The seeds are rounded to bfloat16's values, exact in every floating dtype, so the
float64 reference follows the same direction. Every value the verifier compares, the float64 rule, the
replay and stale-memory checks and the timed turns then apply to the backward pass as well."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch.utils._python_dispatch import _disable_current_modes

from .reference import outputs


def trained_names(model: torch.nn.Module) -> list[str]:
    """The parameters a training step differentiates: those that require gradients."""
    return [n for n, p in model.named_parameters() if p.requires_grad]


def _directions(outs: list[Any]) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(torch.initial_seed() % 2**63)
    with _disable_current_modes():  # the verifier's own draws, not the candidate's compute
        return [torch.randn(o.shape, generator=g).to(torch.bfloat16).to(device=o.device, dtype=o.dtype)
                for o in outs]


class GradStep(torch.nn.Module):
    """forward(*inputs) -> (outputs..., d inputs..., d parameters...), all detached. `call`: what runs the
    model's forward (a torch.compile'd `model`, say); the model's own forward by default."""

    def __init__(self, model: torch.nn.Module, names: list[str], call: Callable[..., Any] | None = None) -> None:
        super().__init__()
        self.model = model
        self.names = names
        self.__dict__["_call"] = model if call is None else call
        self.last: tuple[int, list[int]] = (0, [])  # the last call's output count and differentiated inputs

    def forward(self, *inputs: Any) -> tuple[Any, ...]:
        params = dict(self.model.named_parameters())
        missing = [n for n in self.names if n not in params]
        if missing:
            raise RuntimeError(f"the module has no parameter {missing[0]}: its gradient cannot be checked")
        with torch.enable_grad():
            xs = [x.detach().requires_grad_(True) if isinstance(x, torch.Tensor) and x.is_floating_point() else x
                  for x in inputs]
            outs = outputs(self.__dict__["_call"](*xs))
            grad_in = [i for i, x in enumerate(xs) if isinstance(x, torch.Tensor) and x.requires_grad]
            wrt = [xs[i] for i in grad_in] + [params[n] for n in self.names]
            diff = [o for o in outs if isinstance(o, torch.Tensor) and o.requires_grad]
            if not diff and wrt:
                raise RuntimeError("no output carries a gradient (computed outside autograd, or detached): "
                                   "write the module with `akg translate --backward`")
            grads = torch.autograd.grad(diff, wrt, _directions(diff), allow_unused=True) if diff else ()
        self.last = (len(outs), grad_in)  # names for a verdict, made only if one is needed (`what`)
        return (*[o.detach() if isinstance(o, torch.Tensor) else o for o in outs],
                *[torch.zeros_like(w) if g is None else g for g, w in zip(grads, wrt)])


def what(module: Any, i: int) -> str:
    """How a verdict names value `i` of a call: a gradient by what it differentiates."""
    if not isinstance(module, GradStep):
        return f"output {i}"
    n_out, grad_in = module.last
    labels = [f"output {k}" for k in range(n_out)] + [f"the gradient of input {k}" for k in grad_in] + \
        [f"the gradient of {n}" for n in module.names]
    return labels[i] if i < len(labels) else f"output {i}"
