"""Log-softmax over axis 1 of a 3-d array."""
import jax


def model(params, x):
    return jax.nn.log_softmax(x, axis=1)


def get_params(key):
    return {}


def get_inputs(key):
    return [jax.random.normal(key, (4, 50, 12))]
