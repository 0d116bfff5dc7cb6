"""Training graphs: `torch.compile(model, backend="akg")` on a graph that needs gradients.

AOTAutograd splits the graph into a forward and a backward graph of ATen ops, the saved activations
the only values between them; the partition recomputes cheap pointwise values in the backward pass
rather than saving them where that moves fewer bytes (the min-cut partitioner inductor uses). The
backward ops are expanded into the primitive ATen ops the lift knows (a ReLU's `threshold_backward`
into a `where`, a layer norm's backward into its sums and products), once, by torch's own
decompositions, so each graph goes through the same lift, passes, rendering and verification as an
inference graph: the backward module is checked against the float64 evaluation of the backward graph,
on the saved activations of the first call and incoming gradients drawn for each seed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.fx

_aten = torch.ops.aten
# written as primitive ops (pointwise, sums, matmuls, gathers) before the lift: the backward ops, and the
# forward ops whose extra outputs (a norm's mean and reciprocal deviation) the backward graph reads
DECOMPOSED = [
    _aten.native_layer_norm, _aten.native_group_norm, _aten._native_batch_norm_legit_functional,
    _aten.native_batch_norm, _aten.native_dropout,
    _aten.threshold_backward, _aten.gelu_backward, _aten.silu_backward, _aten.sigmoid_backward,
    _aten.tanh_backward, _aten.hardtanh_backward, _aten.leaky_relu_backward, _aten.elu_backward,
    _aten.softplus_backward, _aten.mish_backward, _aten.hardswish_backward, _aten.hardsigmoid_backward,
    _aten.native_layer_norm_backward, _aten.native_group_norm_backward, _aten.native_batch_norm_backward,
    _aten._softmax_backward_data, _aten._log_softmax_backward_data, _aten.nll_loss_backward,
    _aten.nll_loss_forward, _aten.embedding_dense_backward, _aten.max_pool2d_with_indices_backward,
    _aten.avg_pool2d_backward, _aten.mse_loss_backward, _aten.smooth_l1_loss_backward,
    _aten.binary_cross_entropy_backward, _aten.binary_cross_entropy_with_logits, _aten.select_backward,
    _aten.slice_backward, _aten.transpose_copy, _aten.native_dropout_backward,
]


def decompositions() -> dict[Any, Callable[..., Any]]:
    from torch._decomp import get_decompositions
    return get_decompositions(DECOMPOSED)


def compile_training(gm: torch.fx.GraphModule, example_inputs: Sequence[Any],
                     written: Callable[[torch.fx.GraphModule, str], Callable[..., Any]]) -> Callable[..., Any]:
    """The dynamo graph `gm` as AOTAutograd's forward and backward graphs; `written(graph, kind)` makes
    each ("forward", "backward") an akg graph."""
    from functorch.compile import make_boxed_func, min_cut_rematerialization_partition
    from torch._dynamo.backends.common import aot_autograd

    def compiler(kind: str) -> Callable[[torch.fx.GraphModule, Sequence[Any]], Callable[..., Any]]:
        return lambda g, _examples: make_boxed_func(written(g, kind))

    return aot_autograd(fw_compiler=compiler("forward"), bw_compiler=compiler("backward"),
                        partition_fn=min_cut_rematerialization_partition,
                        decompositions=decompositions())(gm, list(example_inputs))


def compile_inference(gm: torch.fx.GraphModule, example_inputs: Sequence[Any],
                      written: Callable[[torch.fx.GraphModule, str], Callable[..., Any]]) -> Callable[..., Any]:
    """An inference graph dynamo cannot hand over as replayable torch calls (functorch's batching of a
    torch.vmap), as AOTAutograd's ATen graph of it: one forward graph, written as `written(graph, "forward")`."""
    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd

    compiler = aot_autograd(fw_compiler=lambda g, _examples: make_boxed_func(written(g, "forward")),
                            decompositions=decompositions())  # the norms' extra outputs, as in training
    return compiler(gm, list(example_inputs))
