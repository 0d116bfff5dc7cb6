"""An elementwise kernel over 1-D blocks that reads its program id: x * (1 + i) + y for block i."""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def _kernel(x_ref, y_ref, o_ref):
    i = pl.program_id(0)
    o_ref[...] = x_ref[...] * (1.0 + i.astype(jnp.float32)) + y_ref[...]


def model(params, x, y):
    n = x.shape[0]
    return pl.pallas_call(_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), grid=(n // 128,),
                          in_specs=[pl.BlockSpec((128,), lambda i: (i,)), pl.BlockSpec((128,), lambda i: (i,))],
                          out_specs=pl.BlockSpec((128,), lambda i: (i,)), interpret=True)(x, y)


def get_params(key):
    return {}


def get_inputs(key):
    kx, ky = jax.random.split(key)
    return [jax.random.normal(kx, (1024,)), jax.random.normal(ky, (1024,))]
