"""Activations of loom.nn.functional (relu, gelu, the softmax family, ...).

Each elementwise activation is one op of the library: a single expression that fuses with its
neighbours, with PyTorch's derivative. `inplace=True` writes the result into the input through
the op's in-place form (Tensor.elu_, ...), as PyTorch's in-place functions do.
"""

import warnings

from loom import _C

gelu = _C.gelu
softplus = _C.softplus
logsigmoid = _C.log_sigmoid
hardshrink = _C.hardshrink
softshrink = _C.softshrink
prelu = _C.prelu
celu_ = _C.celu_
selu_ = _C.selu_
threshold_ = _C.threshold_
rrelu_ = _C.rrelu_


def relu(input, inplace=False):
    return input.relu_() if inplace else _C.relu(input)


def relu_(input):
    return input.relu_()


def relu6(input, inplace=False):
    return _C.relu6_(input) if inplace else _C.relu6(input)


def elu(input, alpha=1.0, inplace=False):
    return _C.elu_(input, alpha) if inplace else _C.elu(input, alpha)


def elu_(input, alpha=1.0):
    return _C.elu_(input, alpha)


def celu(input, alpha=1.0, inplace=False):
    return _C.celu_(input, alpha) if inplace else _C.celu(input, alpha)


def selu(input, inplace=False):
    return _C.selu_(input) if inplace else _C.selu(input)


def leaky_relu(input, negative_slope=0.01, inplace=False):
    return _C.leaky_relu_(input, negative_slope) if inplace else _C.leaky_relu(input, negative_slope)


def leaky_relu_(input, negative_slope=0.01):
    return _C.leaky_relu_(input, negative_slope)


def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    return _C.hardtanh_(input, min_val, max_val) if inplace else _C.hardtanh(input, min_val, max_val)


def hardtanh_(input, min_val=-1.0, max_val=1.0):
    return _C.hardtanh_(input, min_val, max_val)


def hardsigmoid(input, inplace=False):
    return _C.hardsigmoid_(input) if inplace else _C.hardsigmoid(input)


def hardswish(input, inplace=False):
    return _C.hardswish_(input) if inplace else _C.hardswish(input)


def silu(input, inplace=False):
    return input.silu_() if inplace else _C.silu(input)


def mish(input, inplace=False):
    return _C.mish_(input) if inplace else _C.mish(input)


def threshold(input, threshold, value, inplace=False):
    return _C.threshold_(input, threshold, value) if inplace else _C.threshold(input, threshold, value)


def rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, inplace=False):
    """In training, each negative element is scaled by its own slope drawn from [lower, upper]
    (in lazy mode a random op of the trace, drawn anew at every replay); else by their mean."""
    if inplace:
        return _C.rrelu_(input, lower, upper, training)
    return _C.rrelu(input, lower, upper, training)


def softsign(input):
    return input / (input.abs() + 1)


def tanhshrink(input):
    return input - input.tanh()


def glu(input, dim=-1):
    """The first half of input along dim, gated by the sigmoid of the second half."""
    if input.dim() == 0:
        raise RuntimeError("glu does not support scalars because halving size must be even")
    dim = dim + input.dim() if dim < 0 else dim
    size = input.shape[dim]
    if size % 2:
        raise RuntimeError(f"Halving dimension must be even, but dimension {dim} is size {size}")
    return input.narrow(dim, 0, size // 2) * input.narrow(dim, size // 2, size // 2).sigmoid()


def tanh(input):
    return input.tanh()


def sigmoid(input):
    return input.sigmoid()


def _softmax_dim(name, ndim, stacklevel):
    """PyTorch's dim for softmax-like functions called without one (deprecated there too): 0 for
    0-, 1- and 3-dimensional inputs, else 1."""
    warnings.warn(f"Implicit dimension choice for {name} has been deprecated. Change the call to include "
                  "dim=X as an argument.", stacklevel=stacklevel)
    return 0 if ndim in (0, 1, 3) else 1


def softmax(input, dim=None, _stacklevel=3, dtype=None):
    if dim is None:
        dim = _softmax_dim("softmax", input.dim(), _stacklevel)
    return input.softmax(dim, dtype=dtype)


def log_softmax(input, dim=None, _stacklevel=3, dtype=None):
    if dim is None:
        dim = _softmax_dim("log_softmax", input.dim(), _stacklevel)
    return input.log_softmax(dim, dtype=dtype)


def softmin(input, dim=None, _stacklevel=3, dtype=None):
    if dim is None:
        dim = _softmax_dim("softmin", input.dim(), _stacklevel)
    return (-input).softmax(dim, dtype=dtype)


def gumbel_softmax(logits, tau=1.0, hard=False, eps=1e-10, dim=-1):
    """A sample from the Gumbel-softmax (concrete) distribution over `dim`: softmax((logits + g) /
    tau) with g standard Gumbel noise. hard=True returns the one-hot of its argmax, with the soft
    sample's gradient (the straight-through estimator). eps is accepted for PyTorch's signature
    (unused there too)."""
    gumbels = -_C.empty_like(logits).exponential_().log()
    soft = ((logits + gumbels) / tau).softmax(dim)
    if not hard:
        return soft
    index = soft.argmax(dim, keepdim=True)
    one_hot = _C.zeros_like(logits).scatter_(dim, index, 1.0)
    return one_hot - soft.detach() + soft
