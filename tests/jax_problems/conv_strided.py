"""A strided, depthwise convolution (feature groups) with asymmetric padding."""
import jax


def model(params, x):
    return jax.lax.conv_general_dilated(x, params["w"], window_strides=(2, 2), padding=((0, 1), (0, 1)),
                                        feature_group_count=6, dimension_numbers=("NCHW", "OIHW", "NCHW"))


def get_params(key):
    return {"w": jax.random.normal(key, (6, 1, 3, 3)) * 0.3}


def get_inputs(key):
    return [jax.random.normal(key, (2, 6, 15, 15))]
