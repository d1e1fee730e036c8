"""Activations of loom.nn.functional (relu, gelu, softmax, ...)."""

from loom import _C

relu = _C.relu
gelu = _C.gelu
silu = _C.silu
softplus = _C.softplus


def tanh(input):
    return input.tanh()


def sigmoid(input):
    return input.sigmoid()


def softmax(input, dim=None, dtype=None):
    return input.softmax(-1 if dim is None else dim, dtype=dtype)


def log_softmax(input, dim=None, dtype=None):
    return input.log_softmax(-1 if dim is None else dim, dtype=dtype)
