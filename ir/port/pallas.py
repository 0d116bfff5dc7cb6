"""A `pallas_call` lifted into graph IR: its kernel's references are discharged into values (JAX's own
state discharge), the kernel is vectorised over the grid with `jax.vmap` (a program id becomes the
program's index), and the vectorised kernel is converted like any jaxpr. Each operand's blocks are read
as one value with the grid's programs in front (`views.gather` of the addresses its index map gives, a view
where they are affine) and each output is assembled from its blocks (`views.written`)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from ..convert import LiftCtx
from ..errors import AkgError
from ..graph import Node
from ..types import dtype_of
from . import views

Convert = Callable[[Any, list[Node], list[Any]], list[Node]]
# hints about where a value lives (JAX on a GPU host adds them to a discharged kernel): the value itself
PASS_THROUGH = ("with_memory_space_constraint",)


def _block_sizes(bm: Any, where: str) -> list[int | None]:
    """Each block dimension's size (None: a squeezed dimension of size 1)."""
    out: list[int | None] = []
    for d in bm.block_shape:
        size = getattr(d, "block_size", d)
        kind = type(d).__name__
        if kind not in ("Blocked", "Squeezed", "int", "NoneType"):
            raise AkgError(f"pallas_call at {where}: a {kind} block dimension is not lifted yet (Blocked only)")
        out.append(None if d is None or kind == "Squeezed" else int(size))
    return out


def _offsets(bm: Any, shape: tuple[int, ...], grid: tuple[int, ...], where: str) -> tuple[np.ndarray, np.ndarray]:
    """Per program (grid flattened, row-major) and block element: the operand's flat address and whether it
    lies inside the operand (a partial last block)."""
    import jax
    import jax.numpy as jnp

    sizes = _block_sizes(bm, where)
    ids = np.indices(grid).reshape(len(grid), -1)  # (axes, programs)
    closed = bm.index_map_jaxpr
    got = jax.core.eval_jaxpr(closed.jaxpr, closed.consts, *[jnp.asarray(i, dtype=jnp.int32) for i in ids])
    starts = [np.broadcast_to(np.asarray(b, dtype=np.int64), ids.shape[1:]) for b in got]
    strides = [math.prod(shape[d + 1:]) for d in range(len(shape))]
    kept = [d for d, s in enumerate(sizes) if s is not None]
    block = [sizes[d] for d in kept]
    g = ids.shape[1]
    off = np.zeros([g] + block, dtype=np.int64)
    mask = np.ones([g] + block, dtype=bool)
    for d, s in enumerate(sizes):
        start = starts[d] * (s if s is not None else 1)
        if s is None:
            idx = start.reshape([g] + [1] * len(block))
        else:
            k = kept.index(d)
            ar = np.arange(s).reshape([1] + [s if j == k else 1 for j in range(len(block))])
            idx = start.reshape([g] + [1] * len(block)) + ar
        off = off + idx * strides[d]
        mask = mask & (idx < shape[d])
    return off, mask


def lift_call(cx: LiftCtx, eqn: Any, args: list[Node], p: dict[str, Any], where: str, convert: Convert) -> list[Node]:
    import jax
    import jax.numpy as jnp
    from jax._src.pallas import core as pallas_core
    from jax._src.pallas import primitives as pl_prims
    from jax._src.state.discharge import discharge_state

    gm = p["grid_mapping"]
    grid = tuple(int(x) for x in gm.grid)
    if getattr(gm, "num_scratch_operands", 0) or getattr(gm, "num_index_operands", 0):
        raise AkgError(f"pallas_call at {where}: scratch buffers and scalar prefetch are not lifted yet")
    n_in = len(args)
    outs = list(p["out_avals"])
    maps = list(gm.block_mappings)
    if len(maps) != n_in + len(outs):
        raise AkgError(f"pallas_call at {where}: {len(maps)} block specs for {n_in + len(outs)} operands")
    kernel = jax.extend.core.ClosedJaxpr(p["jaxpr"], ()) if not hasattr(p["jaxpr"], "consts") else p["jaxpr"]
    with pallas_core.tracing_grid_env(grid, tuple(getattr(gm, "vmapped_dims", ()))):  # program ids traced
        discharged = discharge_state(kernel)
    g = math.prod(grid)

    def body(pids: Any, *blocks: Any) -> Any:
        def run(jaxpr: Any, consts: Any, *vals: Any) -> Any:
            env: dict[Any, Any] = {}
            for v, x in zip(jaxpr.constvars, consts):
                env[v] = x
            for v, x in zip(jaxpr.invars, vals):
                env[v] = x
            read = lambda v: v.val if isinstance(v, jax.extend.core.Literal) else env[v]  # noqa: E731
            for e in jaxpr.eqns:
                ins = [read(v) for v in e.invars]
                if e.primitive.name in PASS_THROUGH:
                    res = ins[:1]
                elif e.primitive is pl_prims.program_id_p:
                    res = [pids[e.params["axis"]]]
                elif e.primitive is pl_prims.num_programs_p:
                    res = [jnp.int32(grid[e.params["axis"]])]
                else:
                    r = e.primitive.bind(*ins, **e.params)
                    res = r if e.primitive.multiple_results else [r]
                for v, x in zip(e.outvars, res):
                    env[v] = x
            return [read(v) for v in jaxpr.outvars]
        return run(discharged.jaxpr, discharged.consts, *blocks)

    operands = [(a.shape, a.dtype) for a in args] + [(tuple(o.shape), None) for o in outs]
    addr = [_offsets(bm, tuple(shape), grid, where) for bm, (shape, _) in zip(maps, operands)]
    specs = [jax.ShapeDtypeStruct((g, len(grid)), jnp.int32)]
    specs += [jax.ShapeDtypeStruct(off.shape, jnp.dtype(str(a.type.torch_dtype).removeprefix("torch.")))
              for (off, _), a in zip(addr[:n_in], args)]
    specs += [jax.ShapeDtypeStruct(off.shape, o.dtype) for (off, _), o in zip(addr[n_in:], outs)]
    batched = jax.make_jaxpr(jax.vmap(lambda pid, *bl: body([pid[i] for i in range(len(grid))], *bl)))(*specs)
    pids = np.stack(np.unravel_index(np.arange(g), grid), axis=1).astype(np.int32)
    nodes = [views.constant(cx, pids)]
    for (off, mask), a in zip(addr[:n_in], args):
        nodes.append(views.gather(cx, a, off, mask, 0.0, f"pallas_call at {where}"))
    for (off, _), o in zip(addr[n_in:], outs):
        zero = cx.add("full", [], shape=list(off.shape), value=0.0, dtype=_ir(o.dtype))
        nodes.append(zero)
    final = convert(batched.jaxpr, nodes, list(batched.consts))
    result = []
    for k, ((off, mask), o) in enumerate(zip(addr[n_in:], outs)):
        base = cx.add("full", [], shape=list(o.shape), value=0.0, dtype=_ir(o.dtype))
        val = final[n_in + k]
        result.append(views.written(cx, base, off, mask, val, False, f"pallas_call at {where}"))
    name = str(p.get("name") or getattr(p.get("metadata"), "name", None) or "pallas_call")
    cx.graph.meta.setdefault("ported", []).append(
        {"kernel": name, "grid": list(grid), "writes": [f"output {k}" for k in range(len(outs))], "programs": g})
    return result


def _ir(dtype: Any) -> str:
    """A JAX dtype's IR name (through torch's dtype of the same name: the IR's one table)."""
    return dtype_of(getattr(torch, np.dtype(dtype).name))
