"""The JAX entry of a module written for a JAX problem: `model(params, *inputs)` with the problem's own
signature, running the module's kernels on the arrays through DLPack (no copies where the devices
agree). Every backend's module gets the same entry: it needs only torch's DLPack and JAX."""

from __future__ import annotations

from collections.abc import Sequence

BRIDGE = '''

# --- JAX entry (a JAX problem): model(params, *inputs) as the problem defines it
import jax  # noqa: E402

_AKG_JAX_KEYS = {keys!r}  # the params pytree's leaves in flattening order, by state_dict key
_akg_jax_modules = {{}}  # "last" -> (the params' leaves, ModelNew, its device)


def _akg_jax_key(path):
    parts = []
    for k in path:
        for attr in ("key", "idx", "name"):
            if hasattr(k, attr):
                parts.append(str(getattr(k, attr)))
                break
        else:
            parts.append(str(k))
    return ".".join(parts) or "params"


def _akg_torch(x):
    return torch.from_dlpack(jax.numpy.asarray(x))


def _akg_jax_array(t):
    """A result back to JAX (torch exports only its current device's tensors: `t`'s GPU is made current)."""
    if t.device.type != "cuda":
        return jax.dlpack.from_dlpack(t.contiguous())
    with torch.cuda.device(t.device):
        return jax.dlpack.from_dlpack(t.contiguous())


def _akg_jax_module(params, device):
    """ModelNew holding these parameters on the inputs' device (its constants too; the last parameter
    set's module is kept: weights load once)."""
    leaves = [v for _, v in jax.tree_util.tree_flatten_with_path(params)[0]]
    hit = _akg_jax_modules.get("last")
    if hit is not None and hit[2] == device and len(hit[0]) == len(leaves) and \
            all(a is b for a, b in zip(hit[0], leaves)):
        return hit[1]  # the very same arrays (held here, so no other array can take their identity)
    keys = [_akg_jax_key(p) for p, _ in jax.tree_util.tree_flatten_with_path(params)[0]]
    if keys != _AKG_JAX_KEYS:
        raise ValueError(f"params has leaves {{keys}}; this module was written for {{_AKG_JAX_KEYS}}: "
                         "translate the problem again for this parameter tree")
    m = ModelNew().to(device)
    m.load_state_dict({{k: _akg_torch(v) for k, v in zip(keys, leaves)}}, strict=True)
    m.eval()
    _akg_jax_modules["last"] = (leaves, m, device)
    return m


def model(params, {args}):
    xs = [_akg_torch(x) for x in ({args},)]
    device = next((x.device for x in xs if isinstance(x, torch.Tensor)), torch.device("cpu"))
    m = _akg_jax_module(params, device)
    with torch.no_grad():
        out = m(*xs)
    outs = out if isinstance(out, (tuple, list)) else (out,)
    res = tuple(_akg_jax_array(o) for o in outs)
    return res if len(res) > 1 else res[0]
'''


def jax_entry(param_keys: Sequence[str], input_names: Sequence[str]) -> str:
    """The entry's source for a module whose ModelNew holds `param_keys` and takes `input_names`."""
    args = ", ".join(input_names) or "*inputs"
    return BRIDGE.format(keys=list(param_keys), args=args)
