"""A blocked matmul with a bias and ReLU epilogue as a Pallas kernel: grid (M/bm, N/bn), each program
the product of a row block of x and a column block of w."""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def _kernel(x_ref, w_ref, b_ref, o_ref):
    acc = jnp.dot(x_ref[...], w_ref[...], preferred_element_type=jnp.float32)
    o_ref[...] = jnp.maximum(acc + b_ref[...], 0.0)


def model(params, x):
    w, b = params["w"], params["b"]
    m, k = x.shape
    n = w.shape[1]
    return pl.pallas_call(_kernel, out_shape=jax.ShapeDtypeStruct((m, n), x.dtype), grid=(m // 16, n // 32),
                          in_specs=[pl.BlockSpec((16, k), lambda i, j: (i, 0)),
                                    pl.BlockSpec((k, 32), lambda i, j: (0, j)),
                                    pl.BlockSpec((1, 32), lambda i, j: (0, j))],
                          out_specs=pl.BlockSpec((16, 32), lambda i, j: (i, j)), interpret=True)(x, w, b)


def get_params(key):
    kw, kb = jax.random.split(key)
    return {"w": jax.random.normal(kw, (64, 96)) * 0.1, "b": jax.random.normal(kb, (1, 96))}


def get_inputs(key):
    return [jax.random.normal(key, (48, 64))]
