"""A two-layer MLP with ReLU (dense layers as x @ w + b)."""
import jax
import jax.numpy as jnp


def model(params, x):
    h = jax.nn.relu(x @ params["w1"] + params["b1"])
    return h @ params["w2"] + params["b2"]


def get_params(key):
    k1, k2 = jax.random.split(key)
    return {"w1": jax.random.normal(k1, (64, 128)) * 0.1, "b1": jnp.zeros(128) + 0.01,
            "w2": jax.random.normal(k2, (128, 32)) * 0.1, "b2": jnp.ones(32) * 0.02}


def get_inputs(key):
    return [jax.random.normal(key, (16, 64))]
