"""A batched matmul against a transposed operand, then a reshape and transpose."""
import jax
import jax.numpy as jnp


def model(params, a, b):
    c = jnp.matmul(a, jnp.swapaxes(b, -1, -2))
    return jnp.transpose(c.reshape(3, 2, 8, 12), (1, 0, 3, 2))


def get_params(key):
    return {}


def get_inputs(key):
    ka, kb = jax.random.split(key)
    return [jax.random.normal(ka, (6, 8, 20)), jax.random.normal(kb, (6, 12, 20))]
