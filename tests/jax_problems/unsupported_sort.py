"""Uses a primitive akg does not convert (sort): the lift must say which, and where."""
import jax
import jax.numpy as jnp


def model(params, x):
    return jnp.sort(x, axis=-1) * 2.0


def get_params(key):
    return {}


def get_inputs(key):
    return [jax.random.normal(key, (4, 8))]
