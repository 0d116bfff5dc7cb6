"""Scaled dot-product attention, batched over heads (einsum and softmax)."""
import jax
import jax.numpy as jnp


def model(params, q, k, v):
    s = jnp.einsum("bhqd,bhkd->bhqk", q, k) / jnp.sqrt(q.shape[-1]).astype(q.dtype)
    return jnp.einsum("bhqk,bhkd->bhqd", jax.nn.softmax(s, axis=-1), v)


def get_params(key):
    return {}


def get_inputs(key):
    kq, kk, kv = jax.random.split(key, 3)
    return [jax.random.normal(kq, (2, 4, 32, 16)), jax.random.normal(kk, (2, 4, 32, 16)),
            jax.random.normal(kv, (2, 4, 32, 16))]
