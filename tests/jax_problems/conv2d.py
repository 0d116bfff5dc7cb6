"""A 3x3 convolution (lax.conv_general_dilated, NCHW / OIHW), bias, then GELU."""
import jax
import jax.numpy as jnp


def model(params, x):
    y = jax.lax.conv_general_dilated(x, params["w"], window_strides=(1, 1), padding=((1, 1), (1, 1)),
                                     dimension_numbers=("NCHW", "OIHW", "NCHW"))
    return jax.nn.gelu(y + params["b"][None, :, None, None])


def get_params(key):
    return {"w": jax.random.normal(key, (8, 4, 3, 3)) * 0.2, "b": jnp.arange(8.0) * 0.1}


def get_inputs(key):
    return [jax.random.normal(key, (2, 4, 16, 16))]
