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

import operator
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.fx

from ir.aten import ints, pool_args

_aten = torch.ops.aten
_getitem = operator.getitem
# written as primitive ops (pointwise, sums, matmuls, gathers) before the lift: the backward ops, and the
# forward ops whose extra outputs (a norm's mean and reciprocal deviation) the backward graph reads
DECOMPOSED = [
    _aten.native_layer_norm, _aten.native_group_norm, _aten._native_batch_norm_legit_functional,
    _aten._native_batch_norm_legit,  # its no_stats overload: instance norm in training (no running statistics)
    _aten.native_batch_norm, _aten.native_dropout,
    _aten.threshold_backward, _aten.gelu_backward, _aten.silu_backward, _aten.sigmoid_backward,
    _aten.tanh_backward, _aten.hardtanh_backward, _aten.leaky_relu_backward, _aten.elu_backward,
    _aten.softplus_backward, _aten.mish_backward, _aten.hardswish_backward, _aten.hardsigmoid_backward,
    _aten.native_layer_norm_backward, _aten.native_group_norm_backward, _aten.native_batch_norm_backward,
    _aten._softmax_backward_data, _aten._log_softmax_backward_data, _aten.nll_loss_backward,
    _aten.nll_loss_forward, _aten.max_pool2d_with_indices_backward,
    _aten.avg_pool2d_backward, _aten.mse_loss_backward, _aten.smooth_l1_loss_backward,
    _aten.binary_cross_entropy_backward, _aten.binary_cross_entropy_with_logits, _aten.select_backward,
    _aten.slice_backward, _aten.transpose_copy, _aten.native_dropout_backward,
]
# kept whole, a library call: an embedding's gradient is a fresh [vocabulary, width] buffer zeroed (its page
# faults are most of the time) and rows added in; decomposed, the zeros were a kernel and the functional
# masked index_put then copied the whole buffer again before adding (GPT-2's step on the CPU: +40 ms)


def decompositions() -> dict[Any, Callable[..., Any]]:
    from torch._decomp import get_decompositions
    table = get_decompositions(DECOMPOSED)
    torchs = table[_aten.native_dropout.default]

    def native_dropout(x: torch.Tensor, p: float, train: bool | None) -> tuple[torch.Tensor, torch.Tensor]:
        """Training dropout on the CPU as eager draws it: `empty_like(x).bernoulli_(1 - p)`, divided by 1 - p,
        times x (torch's decomposition draws `rand_like(x) > p`: other numbers under the same seed). A written
        module then draws eager's very mask, and its outputs and gradients compare value for value."""
        if x.device.type != "cpu" or not train or not 0 < p < 1:
            return torchs(x, p, train)
        noise = _aten.bernoulli.p(x, 1 - p) / (1 - p)
        return x * noise, noise != 0

    table[_aten.native_dropout.default] = native_dropout
    return table


SAVED_FROM = "akg_saved_from"  # a training forward graph's meta: where its saved activations start (`cuda_graphs`)

# a saved activation that is one of these views of another value is saved as that value and viewed again in
# the backward graph: torch makes the view for free, a written module would copy it into a new buffer
_SAVED_VIEWS = (_aten.t.default, _aten.transpose.int, _aten.permute.default)


def partition(joint: torch.fx.GraphModule, joint_inputs: Any, **kw: Any) -> tuple[torch.fx.GraphModule,
                                                                                  torch.fx.GraphModule]:
    """The min-cut partition inductor uses, then `saved_as_bases`."""
    from functorch.compile import min_cut_rematerialization_partition

    fw, bw = min_cut_rematerialization_partition(joint, joint_inputs, **kw)
    saved_as_bases(fw, bw, kw["num_fwd_outputs"])
    fw.meta[SAVED_FROM] = kw["num_fwd_outputs"]  # the forward's outputs from here on are saved for the backward
    return fw, bw


def saved_as_bases(fw: torch.fx.GraphModule, bw: torch.fx.GraphModule, num_fwd_outputs: int) -> int:
    """Each saved value that is a transpose or permutation of another forward value (`_SAVED_VIEWS`) is
    saved as that value, the view made again at the top of the backward graph (the backward's input of
    the same name). Returns how many were moved."""
    out = next(n for n in fw.graph.nodes if n.op == "output")
    outs = list(out.args[0])
    holders = {n.name: n for n in bw.graph.nodes if n.op == "placeholder"}
    first = next((n for n in bw.graph.nodes if n.op != "placeholder"), None)
    moved = 0
    for i in range(num_fwd_outputs, len(outs)):
        chain, v = [], outs[i]
        ph = holders.get(getattr(v, "name", ""))
        while (isinstance(v, torch.fx.Node) and v.op == "call_function" and v.target in _SAVED_VIEWS
               and isinstance(v.args[0], torch.fx.Node)):
            chain.append(v)  # t(t(x)) is x: a chain of views is saved as its first base
            v = v.args[0]
        if not chain or ph is None or first is None:
            continue
        outs[i] = v
        node, made = ph, []
        with bw.graph.inserting_before(first):
            for view in reversed(chain):
                node = bw.graph.call_function(view.target, (node, *view.args[1:]))
                node.meta = dict(view.meta)
                made.append(node)
        ph.replace_all_uses_with(node, delete_user_cb=lambda u, made=made: u is not made[0])
        ph.meta = dict(v.meta)
        moved += 1
    if moved:
        out.args = (tuple(outs),)
        fw.graph.eliminate_dead_code()  # a view only the backward read
        for g in (fw, bw):
            g.graph.lint()
            g.recompile()
    return moved


def compile_training(gm: torch.fx.GraphModule, example_inputs: Sequence[Any],
                     written: Callable[[torch.fx.GraphModule, str], Callable[..., Any]]) -> Callable[..., Any]:
    """The dynamo graph `gm` as AOTAutograd's forward and backward graphs; `written(graph, kind)` makes
    each ("forward", "backward") an akg graph."""
    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd

    def compiler(kind: str) -> Callable[[torch.fx.GraphModule, Sequence[Any]], Callable[..., Any]]:
        return lambda g, _examples: make_boxed_func(written(g, kind))

    return aot_autograd(fw_compiler=compiler("forward"), bw_compiler=compiler("backward"),
                        partition_fn=partition,
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




_POOLS = {_aten.max_pool2d_with_indices.default: 2, _aten.max_pool3d_with_indices.default: 3}
_POOL_DEFAULTS = (None, None, (), 0, 1)  # x, kernel, stride (the kernel's), padding, dilation
_THRESHOLDS = (_aten.le.Scalar, _aten.lt.Scalar, _aten.ge.Scalar, _aten.gt.Scalar)
_VIEWS = (_aten.view.default, _aten._unsafe_view.default, _aten.reshape.default)


def discrete_outputs(gm: torch.fx.GraphModule, kept: list[int]
                     ) -> tuple[dict[int, dict[str, Any]], torch.fx.GraphModule | None]:
    """The outputs (numbered as the problem returns them: `kept`'s order) that are a max pool's indices or a
    comparison of a float value with a constant (a ReLU's `x <= 0` mask), or a view of one, each with its
    kind (the pool's window; the constant), its own shape and which output of the probe holds the value it
    was taken from; and the probe: the graph returning those values. The verifier judges such outputs by
    those values (`verifier.discrete`): a kernel that rounds them otherwise than torch may pick the other
    of two near-equal maxima, or fall on the other side of the constant, a valid subgradient either way."""
    outs = list(next(n for n in gm.graph.nodes if n.op == "output").args[0])
    found: dict[int, dict[str, Any]] = {}
    sources: list[torch.fx.Node] = []

    def source(v: torch.fx.Node) -> int:
        if v not in sources:
            sources.append(v)
        return sources.index(v)

    for k, g in enumerate(kept):
        n = outs[g]
        while isinstance(n, torch.fx.Node) and n.target in _VIEWS:
            n = n.args[0]
        val = n.meta.get("val") if isinstance(n, torch.fx.Node) else None
        if not isinstance(val, torch.Tensor):
            continue
        x = n.args[0] if n.args else None
        xval = x.meta.get("val") if isinstance(x, torch.fx.Node) else None
        if n.target in _THRESHOLDS and isinstance(xval, torch.Tensor) and xval.is_floating_point() \
                and isinstance(n.args[1], (int, float)):
            found[k] = {"kind": "threshold", "value": source(x), "shape": list(val.shape), "at": float(n.args[1])}
            continue
        if not (n.target is _getitem and n.args[1] == 1):
            continue
        pool = n.args[0]
        rank = _POOLS.get(getattr(pool, "target", None)) if isinstance(pool, torch.fx.Node) else None
        if rank is None:
            continue
        _, kernel, stride, padding, dilation = (*pool.args, *_POOL_DEFAULTS[len(pool.args):])[:5]
        kernel, stride, padding = pool_args(kernel, stride, padding, rank)  # as the lift reads a pool's
        found[k] = {"kind": "pool", "value": source(pool.args[0]), "shape": list(val.shape), "kernel": kernel,
                    "stride": stride, "padding": padding, "dilation": ints(dilation, rank)}
    if not found:
        return {}, None
    graph, copied = torch.fx.Graph(), {}
    graph.graph_copy(gm.graph, copied)
    graph.output(tuple(copied[n] for n in sources))
    graph.eliminate_dead_code()
    return found, torch.fx.GraphModule(gm, graph)
