"""Host time of each step of a torch -> JAX DLPack import on a CUDA tensor (torch's export with and without a
stream handshake, JAX's buffer import, jnp.asarray, the public from_dlpack) and of a jit dispatch: what the
Pallas launch's one-handshake import (dsl_backends/pallas/backend.py `_akg_to_jax`) was built from.
    python benchmarks/gpu/jax_dlpack_probe.py"""
import statistics
import time

import jax
import jax._src.dlpack as jd
import jax.numpy as jnp
import torch
from jax._src.lib import _jax

a = torch.randn(1 << 20, device="cuda")


def us(f, n=300):
    f()
    torch.cuda.synchronize()
    ts = []
    for _ in range(n):
        t0 = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts) * 1e6


def show(name, f):
    print(f"{name:32s} {us(f):.1f} us")


kind, index = a.__dlpack_device__()
dev = jd.xla_bridge.get_backend("cuda").device_from_local_hardware_id(index)
stream = dev.get_stream_for_external_ready_events()


def raw():
    cap = a.__dlpack__(stream=stream)
    try:
        return _jax.dlpack_managed_tensor_to_buffer(cap, dev, stream, None, int(kind))
    except TypeError:  # an older jaxlib
        return _jax.dlpack_managed_tensor_to_buffer(cap, dev, stream, None)


show("a.__dlpack__(stream=jax's)", lambda: a.__dlpack__(stream=stream))
show("a.__dlpack__(stream=-1)", lambda: a.__dlpack__(stream=-1))
show("__dlpack__ + buffer import", raw)
r = raw()
print("the view shares the tensor's memory:", r.unsafe_buffer_pointer() == a.data_ptr())
show("jnp.asarray(view)", lambda: jnp.asarray(r, dtype=r.dtype))
show("jax.dlpack.from_dlpack", lambda: jax.dlpack.from_dlpack(a))
f = jax.jit(lambda x: x * 2)
show("jit(x * 2) dispatch", lambda: f(r))
with jax.enable_x64(True):
    show("x64: jax.dlpack.from_dlpack", lambda: jax.dlpack.from_dlpack(a))
    show("x64: jit dispatch", lambda: f(r))
y = f(r)
show("torch.from_dlpack(jax output)", lambda: torch.from_dlpack(y))
print("values through the view:", torch.allclose(torch.from_dlpack(f(raw())), a * 2))
