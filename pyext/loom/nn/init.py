"""loom.nn.init: in-place initializations, as torch.nn.init (driven by loom.manual_seed).

Every function fills its tensor under no_grad and returns it. The random draws come from loom's
generator (loom.rand / loom.randn), so loom.manual_seed makes them repeatable; they are not
PyTorch's draws (PyTorch's CPU generator is a different one), only the same distributions.
orthogonal_ and sparse_ compute their QR decomposition and per-column permutations on the host
(numpy), from loom-generated values and a seed drawn from loom's generator.
"""

import math
import warnings

import numpy as np

import loom


def _fill(tensor, values):
    with loom.no_grad():
        tensor.copy_(values)
    return tensor


def _host_rng():
    """A numpy generator seeded from loom's generator (so loom.manual_seed decides it)."""
    seed = loom.randint(0, 2**31 - 1, (2,), device="cpu").tolist()
    return np.random.default_rng(seed)


def calculate_gain(nonlinearity, param=None):
    """The recommended gain for a nonlinearity (PyTorch's table)."""
    linear_fns = ["linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d"]
    if nonlinearity in linear_fns or nonlinearity == "sigmoid":
        return 1
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            negative_slope = 0.01
        elif not isinstance(param, bool) and isinstance(param, (int, float)):
            negative_slope = param
        else:
            raise ValueError(f"negative_slope {param} not a valid number")
        return math.sqrt(2.0 / (1 + negative_slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


def uniform_(tensor, a=0.0, b=1.0):
    """U(a, b)."""
    return _fill(tensor, loom.rand_like(tensor) * (b - a) + a)


def normal_(tensor, mean=0.0, std=1.0):
    """N(mean, std^2)."""
    return _fill(tensor, loom.randn_like(tensor) * std + mean)


def _erfinv(y):
    """The inverse error function, in loom ops: Giles' single-precision approximation ("Approximating
    the erfinv function", 2010) refined by two Newton steps on erf, which brings it to the
    dtype's precision."""
    w = -((1 - y) * (1 + y)).log()
    central = w - 2.5
    p = 2.81022636e-08
    for c in (3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087, -0.00125372503, -0.00417768164,
              0.246640727, 1.50140941):
        p = c + p * central
    tail = w.sqrt() - 3.0
    q = -0.000200214257
    for c in (0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773, -0.0076224613, 0.00943887047,
              1.00167406, 2.83297682):
        q = c + q * tail
    x = loom.where(w < 5.0, p, q) * y
    for _ in range(2):
        slope = (2.0 / math.sqrt(math.pi)) * (-(x * x)).exp()
        x = x - (x.erf() - y) / slope
    return x


def trunc_normal_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0):
    """N(mean, std^2) truncated to [a, b], by inverting the normal CDF on a uniform draw over
    [cdf(a), cdf(b)] (PyTorch's method); values end clamped to [a, b]."""
    def norm_cdf(x):
        return (1.0 + math.erf(x / math.sqrt(2.0))) / 2.0

    if (mean < a - 2 * std) or (mean > b + 2 * std):
        warnings.warn("mean is more than 2 std from [a, b] in nn.init.trunc_normal_. The distribution of values may "
                      "be incorrect.", stacklevel=2)
    low, high = norm_cdf((a - mean) / std), norm_cdf((b - mean) / std)
    with loom.no_grad():
        work = tensor.double() if tensor.dtype in (loom.float16, loom.bfloat16) else tensor
        u = loom.rand_like(work) * (2 * high - 2 * low) + (2 * low - 1)
        values = (_erfinv(u) * (std * math.sqrt(2.0)) + mean).clamp(min=a, max=b)
        tensor.copy_(values)
    return tensor


def constant_(tensor, val):
    with loom.no_grad():
        tensor.fill_(val)
    return tensor


def ones_(tensor):
    return constant_(tensor, 1.0)


def zeros_(tensor):
    return constant_(tensor, 0.0)


def eye_(tensor):
    """The identity matrix (a 2-D tensor)."""
    if tensor.dim() != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    return _fill(tensor, loom.eye(tensor.shape[0], tensor.shape[1], dtype=tensor.dtype, device=tensor.device))


def dirac_(tensor, groups=1):
    """The Dirac delta of a convolution weight (3-5 dims): each of the first min(out / groups,
    in) channels of a group passes its input channel through unchanged."""
    dims = tensor.dim()
    if dims not in (3, 4, 5):
        raise ValueError("Only tensors with 3, 4, or 5 dimensions are supported")
    sizes = tuple(tensor.shape)
    if sizes[0] % groups != 0:
        raise ValueError("dim 0 must be divisible by groups")
    out_per_group = sizes[0] // groups
    values = np.zeros(sizes)
    center = tuple(s // 2 for s in sizes[2:])
    for g in range(groups):
        for d in range(min(out_per_group, sizes[1])):
            values[(g * out_per_group + d, d) + center] = 1
    return _fill(tensor, loom.tensor(values, dtype=tensor.dtype, device=tensor.device))


def _calculate_fan_in_and_fan_out(tensor):
    if tensor.dim() < 2:
        raise ValueError("Fan in and fan out can not be computed for tensor with fewer than 2 dimensions")
    receptive = 1
    for s in tensor.shape[2:]:
        receptive *= s
    return tensor.shape[1] * receptive, tensor.shape[0] * receptive


def _calculate_correct_fan(tensor, mode):
    mode = mode.lower()
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"Mode {mode} not supported, please use one of fan_in, fan_out")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def xavier_uniform_(tensor, gain=1.0):
    """U(-a, a), a = gain * sqrt(6 / (fan_in + fan_out))."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    bound = gain * math.sqrt(6.0 / float(fan_in + fan_out))
    return uniform_(tensor, -bound, bound)


def xavier_normal_(tensor, gain=1.0):
    """N(0, std^2), std = gain * sqrt(2 / (fan_in + fan_out))."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / float(fan_in + fan_out)))


def kaiming_uniform_(tensor, a=0.0, mode="fan_in", nonlinearity="leaky_relu"):
    """U(-b, b), b = gain * sqrt(3 / fan) (He et al.)."""
    if 0 in tuple(tensor.shape):
        warnings.warn("Initializing zero-element tensors is a no-op")
        return tensor
    fan = _calculate_correct_fan(tensor, mode)
    bound = math.sqrt(3.0) * calculate_gain(nonlinearity, a) / math.sqrt(fan)
    return uniform_(tensor, -bound, bound)


def kaiming_normal_(tensor, a=0.0, mode="fan_in", nonlinearity="leaky_relu"):
    """N(0, std^2), std = gain / sqrt(fan) (He et al.)."""
    if 0 in tuple(tensor.shape):
        warnings.warn("Initializing zero-element tensors is a no-op")
        return tensor
    fan = _calculate_correct_fan(tensor, mode)
    return normal_(tensor, 0.0, calculate_gain(nonlinearity, a) / math.sqrt(fan))


def orthogonal_(tensor, gain=1.0):
    """A (semi-)orthogonal matrix (Saxe et al.) of the tensor flattened to (size(0), -1): the Q of
    the QR decomposition of a normal draw, its columns' signs fixed by R's diagonal, times gain."""
    if tensor.dim() < 2:
        raise ValueError("Only tensors with 2 or more dimensions are supported")
    if tensor.numel() == 0:
        return tensor
    rows = tensor.shape[0]
    cols = tensor.numel() // rows
    flat = loom.randn(rows, cols, dtype=loom.float64, device="cpu").numpy()
    if rows < cols:
        flat = flat.T
    q, r = np.linalg.qr(flat)
    q = q * np.sign(np.diag(r))
    if rows < cols:
        q = q.T
    return _fill(tensor, loom.tensor(q.reshape(tuple(tensor.shape)) * gain, dtype=tensor.dtype, device=tensor.device))


def sparse_(tensor, sparsity, std=0.01):
    """A 2-D matrix drawn from N(0, std^2) with ceil(sparsity * rows) zeros in each column, at
    rows chosen at random."""
    if tensor.dim() != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    rows, cols = tensor.shape
    num_zeros = int(math.ceil(sparsity * rows))
    rng = _host_rng()
    keep = np.ones((rows, cols))
    for col in range(cols):
        keep[rng.permutation(rows)[:num_zeros], col] = 0
    normal_(tensor, 0.0, std)
    with loom.no_grad():
        tensor.mul_(loom.tensor(keep, dtype=tensor.dtype, device=tensor.device))
    return tensor


def _deprecated(fn):
    def alias(*args, **kwargs):
        warnings.warn(f"nn.init.{fn.__name__[:-1]} is now deprecated in favor of nn.init.{fn.__name__}.",
                      FutureWarning, stacklevel=2)
        return fn(*args, **kwargs)
    alias.__name__ = fn.__name__[:-1]
    alias.__doc__ = f"Deprecated: {fn.__name__}."
    return alias


uniform = _deprecated(uniform_)
normal = _deprecated(normal_)
constant = _deprecated(constant_)
eye = _deprecated(eye_)
dirac = _deprecated(dirac_)
xavier_uniform = _deprecated(xavier_uniform_)
xavier_normal = _deprecated(xavier_normal_)
kaiming_uniform = _deprecated(kaiming_uniform_)
kaiming_normal = _deprecated(kaiming_normal_)
orthogonal = _deprecated(orthogonal_)
sparse = _deprecated(sparse_)
