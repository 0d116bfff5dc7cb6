"""logsumexp over the last axis (jax.nn.logsumexp's stable form)."""
import jax


def model(params, x):
    return jax.nn.logsumexp(x, axis=-1)


def get_params(key):
    return {}


def get_inputs(key):
    return [jax.random.normal(key, (16, 300)) * 4]
