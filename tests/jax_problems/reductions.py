"""Sums, maxima, minima and means over different axes, and an argmax."""
import jax
import jax.numpy as jnp


def model(params, x):
    return (jnp.sum(x, axis=0), jnp.max(x, axis=1), jnp.min(x, axis=(1, 2)), jnp.mean(x, axis=-1),
            jnp.argmax(x, axis=2))


def get_params(key):
    return {}


def get_inputs(key):
    return [jax.random.normal(key, (6, 10, 14))]
