"""A pre-norm residual MLP block: x + W2 gelu(W1 layer_norm(x))."""
import jax
import jax.numpy as jnp


def _ln(x, g, b):
    m = x.mean(-1, keepdims=True)
    v = ((x - m) ** 2).mean(-1, keepdims=True)
    return (x - m) / jnp.sqrt(v + 1e-5) * g + b


def model(params, x):
    h = _ln(x, params["ln"]["g"], params["ln"]["b"])
    h = jax.nn.gelu(h @ params["fc1"]["w"] + params["fc1"]["b"])
    return x + h @ params["fc2"]["w"] + params["fc2"]["b"]


def get_params(key):
    k1, k2 = jax.random.split(key)
    return {"ln": {"g": jnp.ones(32), "b": jnp.zeros(32)},
            "fc1": {"w": jax.random.normal(k1, (32, 128)) * 0.1, "b": jnp.zeros(128)},
            "fc2": {"w": jax.random.normal(k2, (128, 32)) * 0.1, "b": jnp.zeros(32)}}


def get_inputs(key):
    return [jax.random.normal(key, (4, 16, 32))]
