"""Normalizations of loom.nn.functional: batch, instance, group, layer, RMS and local response norm."""

import math

import loom
from loom import _C
from loom import _argcheck


def _channel_shape(input):
    """(1, C, 1, ...): a per-channel vector broadcast against (N, C, *)."""
    return (1, input.shape[1]) + (1,) * (input.dim() - 2)


def _check_tensors(fn, input, **optional):
    """PyTorch's TypeError for an input that is no Tensor or an optional tensor argument (running
    statistics, weight, bias) that is neither a Tensor nor None."""
    _argcheck.tensor(fn, "input", input, 1)
    for name, value in optional.items():
        _argcheck.tensor(fn, name, value, optional=True)


def _affine(out, weight, bias, shape):
    if weight is not None:
        out = out * weight.reshape(shape)
    if bias is not None:
        out = out + bias.reshape(shape)
    return out


def _update_running(running, value, momentum):
    """running = (1 - momentum) * running + momentum * value, in place (no gradient): in lazy
    mode the write joins the step's trace. `momentum` is a number (a trace parameter) or a 0-d
    tensor (the cumulative average of momentum=None)."""
    with loom.no_grad():
        running.mul_(1 - momentum).add_(value * momentum)


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1, eps=1e-5):
    """Normalizes each channel (dim 1) over the batch and every other dim. Training mode uses the
    batch statistics and, given running_mean / running_var, moves them towards the batch's
    (the variance unbiased) in place; otherwise the running statistics normalize."""
    _check_tensors("batch_norm", input, running_mean=running_mean, running_var=running_var, weight=weight, bias=bias)
    _argcheck.boolean("batch_norm", "training", training)
    if input.dim() < 2:
        raise ValueError(f"batch_norm expects an input of at least 2 dimensions (N, C, *), got {input.dim()}D "
                         f"input of size {list(input.shape)}")
    shape = _channel_shape(input)
    channels = input.shape[1]
    for name, t in (("running_mean", running_mean), ("running_var", running_var), ("weight", weight),
                    ("bias", bias)):
        if t is not None and t.numel() != channels:
            raise RuntimeError(f"batch_norm: {name} should contain {channels} elements not {t.numel()}")
    if training:
        count = input.shape[0] * int(math.prod(input.shape[2:]))   # values per channel
        # exactly one value per channel has no variance; an empty batch is allowed, as in PyTorch
        if count == 1:
            raise ValueError(f"Expected more than 1 value per channel when training, got input size "
                             f"{loom.Size(input.shape)}")
        dims = (0,) + tuple(range(2, input.dim()))
        mean = input.mean(dims, keepdim=True)
        centered = input - mean
        var = (centered * centered).mean(dims, keepdim=True)
        # an empty batch has no statistics (its mean is NaN): the running ones stay, as in PyTorch
        if running_mean is not None and count:
            _update_running(running_mean, mean.reshape(channels), momentum)
        if running_var is not None and count:
            _update_running(running_var, var.reshape(channels) * (count / (count - 1)), momentum)
    else:
        if running_mean is None or running_var is None:
            raise RuntimeError("batch_norm in evaluation mode needs running_mean and running_var")
        centered = input - running_mean.reshape(shape)
        var = running_var.reshape(shape)
    return _affine(centered * (var + eps).rsqrt(), weight, bias, shape)


def instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None, use_input_stats=True,
                  momentum=0.1, eps=1e-5):
    """Normalizes each (sample, channel) over its spatial dims. With use_input_stats and running
    statistics given, those move towards the batch's average of the instance statistics."""
    _check_tensors("instance_norm", input, running_mean=running_mean, running_var=running_var, weight=weight,
                   bias=bias)
    _argcheck.boolean("instance_norm", "use_input_stats", use_input_stats)
    if input.dim() < 3:
        raise ValueError(f"instance_norm expects an input of at least 3 dimensions (N, C, *), got "
                         f"{input.dim()}D input of size {list(input.shape)}")
    shape = _channel_shape(input)
    if use_input_stats:
        dims = tuple(range(2, input.dim()))
        count = 1
        for s in input.shape[2:]:
            count *= s
        if count <= 1:
            raise ValueError(f"Expected more than 1 spatial element when training, got input size "
                             f"{loom.Size(input.shape)}")
        mean = input.mean(dims, keepdim=True)
        centered = input - mean
        var = (centered * centered).mean(dims, keepdim=True)
        channels = input.shape[1]
        if running_mean is not None:
            _update_running(running_mean, mean.reshape(-1, channels).mean(0), momentum)
        if running_var is not None:
            _update_running(running_var, var.reshape(-1, channels).mean(0) * (count / (count - 1)), momentum)
    else:
        if running_mean is None or running_var is None:
            raise RuntimeError("Expected running_mean and running_var to be defined when use_input_stats is false")
        centered = input - running_mean.reshape(shape)
        var = running_var.reshape(shape)
    return _affine(centered * (var + eps).rsqrt(), weight, bias, shape)


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5):
    """Normalizes each sample's channels in num_groups groups, over each group's channels and
    the spatial dims; then a per-channel affine map."""
    _check_tensors("group_norm", input, weight=weight, bias=bias)
    if input.dim() < 2:
        raise RuntimeError(f"Expected at least 2 dimensions for input tensor but received {input.dim()}")
    n, channels = input.shape[0], input.shape[1]
    if channels % num_groups != 0:
        raise RuntimeError(f"Expected number of channels in input to be divisible by num_groups, but got input of "
                           f"shape {list(input.shape)} and num_groups={num_groups}")
    grouped = input.reshape(n, num_groups, -1)
    mean = grouped.mean(-1, keepdim=True)
    centered = grouped - mean
    var = (centered * centered).mean(-1, keepdim=True)
    out = (centered * (var + eps).rsqrt()).reshape(input.shape)
    return _affine(out, weight, bias, _channel_shape(input))


def _normalized_dims(input, normalized_shape, name, weight=None, bias=None):
    _check_tensors(name, input, weight=weight, bias=bias)
    if isinstance(normalized_shape, int):
        normalized_shape = (normalized_shape,)
    normalized_shape = tuple(normalized_shape)
    if tuple(input.shape[-len(normalized_shape):]) != normalized_shape or input.dim() < len(normalized_shape):
        raise RuntimeError(f"Given normalized_shape={list(normalized_shape)}, expected input with shape "
                           f"[*, {', '.join(map(str, normalized_shape))}], but got input of size{list(input.shape)}")
    return tuple(range(-len(normalized_shape), 0))


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """Normalizes over the last len(normalized_shape) dims, then the elementwise affine map: one
    op with PyTorch's derivative over the saved mean and rstd (grad_fn NativeLayerNormBackward0,
    lazy/ops_norm.cpp)."""
    dims = _normalized_dims(input, normalized_shape, "layer_norm", weight, bias)
    return _C._layer_norm(input, len(dims), weight, bias, eps)


# torch.finfo(dtype).eps, rms_norm's default epsilon
_EPS = {loom.float16: 0.0009765625, loom.bfloat16: 0.0078125, loom.float32: 1.1920928955078125e-07,
        loom.float64: 2.220446049250313e-16}


def rms_norm(input, normalized_shape, weight=None, eps=None):
    """x / sqrt(mean(x^2) + eps) over the last len(normalized_shape) dims, times weight; eps
    defaults to the machine epsilon of the input's dtype, as PyTorch's."""
    dims = _normalized_dims(input, normalized_shape, "rms_norm", weight)
    if eps is None:
        eps = _EPS.get(input.dtype, _EPS[loom.float32])
    return _C._rms_norm(input, len(dims), weight, eps)


def local_response_norm(input, size, alpha=1e-4, beta=0.75, k=1.0):
    """input / (k + alpha * mean of squares over `size` neighbouring channels) ** beta, the
    window zero-padded by size // 2 channels before and (size - 1) // 2 after (PyTorch's)."""
    if input.dim() < 3:
        raise ValueError(f"Expected 3D or higher dimensionality input (got {input.dim()} dimensions)")
    if input.numel() == 0:
        return input
    channels = input.shape[1]
    square = input * input
    before, after = size // 2, (size - 1) // 2
    parts = []
    if before:
        parts.append(loom.zeros(input.shape[0], before, *input.shape[2:], dtype=input.dtype, device=input.device))
    parts.append(square)
    if after:
        parts.append(loom.zeros(input.shape[0], after, *input.shape[2:], dtype=input.dtype, device=input.device))
    padded = loom.cat(parts, 1) if len(parts) > 1 else square
    window = padded.narrow(1, 0, channels)
    for i in range(1, size):
        window = window + padded.narrow(1, i, channels)
    div = (window * (alpha / size) + k) ** beta
    return input / div
