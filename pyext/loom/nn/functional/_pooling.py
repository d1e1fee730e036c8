"""Pooling of loom.nn.functional: max, average, adaptive, Lp pooling and max unpooling.

The pools are reductions over a window view of the input (lazy/ops_pool.cpp): one fused row
kernel each, no copy of the windows. max pooling's indices are flat positions in the input's
spatial plane, as PyTorch's; with autograd, the gradient goes to the first maximum of a window.
"""

from loom import _C
from loom.nn.functional._activation import relu
from loom import _argcheck

avg_pool1d = _C.avg_pool1d
avg_pool2d = _C.avg_pool2d
avg_pool3d = _C.avg_pool3d
adaptive_avg_pool1d = _C.adaptive_avg_pool1d


def _max_pool(values_fn, indices_fn):
    def pool(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
        if return_indices:
            return indices_fn(input, kernel_size, stride, padding, dilation, ceil_mode)
        return values_fn(input, kernel_size, stride, padding, dilation, ceil_mode)
    return pool


max_pool1d = _max_pool(_C.max_pool1d, _C.max_pool1d_with_indices)
max_pool2d = _max_pool(_C.max_pool2d, _C.max_pool2d_with_indices)
max_pool3d = _max_pool(_C.max_pool3d, _C.max_pool3d_with_indices)
for _name, _fn in (("max_pool1d", max_pool1d), ("max_pool2d", max_pool2d), ("max_pool3d", max_pool3d)):
    _fn.__name__ = _fn.__qualname__ = _name
    _fn.__doc__ = (f"{_name}(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, "
                   f"return_indices=False): the maxima of the windows; with return_indices, (values, indices).")


def max_pool1d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                            return_indices=False):
    _argcheck.tensor("max_pool1d_with_indices", "input", input, 1)
    return _C.max_pool1d_with_indices(input, kernel_size, stride, padding, dilation, ceil_mode)


def max_pool2d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                            return_indices=False):
    _argcheck.tensor("max_pool2d_with_indices", "input", input, 1)
    return _C.max_pool2d_with_indices(input, kernel_size, stride, padding, dilation, ceil_mode)


def max_pool3d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                            return_indices=False):
    _argcheck.tensor("max_pool3d_with_indices", "input", input, 1)
    return _C.max_pool3d_with_indices(input, kernel_size, stride, padding, dilation, ceil_mode)


def _sizes(input, output_size, k):
    """An adaptive pool's output size with None meaning the input's size along that dim."""
    if isinstance(output_size, int):
        return [output_size] * k
    output_size = list(output_size)
    if len(output_size) != k:
        return output_size  # the binding raises PyTorch's error
    return [input.shape[input.dim() - k + i] if s is None else s for i, s in enumerate(output_size)]


def adaptive_avg_pool2d(input, output_size):
    _argcheck.tensor("adaptive_avg_pool2d", "input", input, 1)
    return _C._adaptive_avg_pool2d(input, _sizes(input, output_size, 2))


def adaptive_avg_pool3d(input, output_size):
    _argcheck.tensor("adaptive_avg_pool3d", "input", input, 1)
    return _C._adaptive_avg_pool3d(input, _sizes(input, output_size, 3))


def adaptive_max_pool1d(input, output_size, return_indices=False):
    _argcheck.tensor("adaptive_max_pool1d", "input", input, 1)
    values, indices = _C.adaptive_max_pool1d(input, output_size)
    return (values, indices) if return_indices else values


def adaptive_max_pool2d(input, output_size, return_indices=False):
    _argcheck.tensor("adaptive_max_pool2d", "input", input, 1)
    values, indices = _C._adaptive_max_pool2d(input, _sizes(input, output_size, 2))
    return (values, indices) if return_indices else values


def adaptive_max_pool3d(input, output_size, return_indices=False):
    _argcheck.tensor("adaptive_max_pool3d", "input", input, 1)
    values, indices = _C._adaptive_max_pool3d(input, _sizes(input, output_size, 3))
    return (values, indices) if return_indices else values


def adaptive_max_pool1d_with_indices(input, output_size, return_indices=False):
    _argcheck.tensor("adaptive_max_pool1d_with_indices", "input", input, 1)
    return _C.adaptive_max_pool1d(input, output_size)


def adaptive_max_pool2d_with_indices(input, output_size, return_indices=False):
    _argcheck.tensor("adaptive_max_pool2d_with_indices", "input", input, 1)
    return _C._adaptive_max_pool2d(input, _sizes(input, output_size, 2))


def adaptive_max_pool3d_with_indices(input, output_size, return_indices=False):
    _argcheck.tensor("adaptive_max_pool3d_with_indices", "input", input, 1)
    return _C._adaptive_max_pool3d(input, _sizes(input, output_size, 3))


def _tuple(value, k):
    return tuple(value) if isinstance(value, (list, tuple)) else (value,) * k


def _unpool_size(input, kernel_size, stride, padding, output_size, k):
    """PyTorch's _unpool_output_size: (in - 1) * stride - 2 * padding + kernel per dim, or the
    given size (its last k entries), which must lie within a stride of that."""
    kernel = _tuple(kernel_size, k)
    stride = _tuple(stride if stride is not None else kernel_size, k)
    padding = _tuple(padding, k)
    spatial = input.shape[input.dim() - k:]
    default = [(spatial[d] - 1) * stride[d] + kernel[d] - 2 * padding[d] for d in range(k)]
    if output_size is None:
        return default
    output_size = list(output_size)
    if len(output_size) == k + 2:
        output_size = output_size[2:]
    if len(output_size) != k:
        raise ValueError(f"output_size should be a sequence containing {k} or {k + 2} elements, but it has a "
                         f"length of '{len(output_size)}'")
    for d in range(k):
        low, high = default[d] - stride[d], default[d] + stride[d]
        if not low < output_size[d] < high:
            raise ValueError(f'invalid output_size "{tuple(output_size)}" (dim {d} must be between {low} and {high})')
    return output_size


def max_unpool1d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """The inverse of max_pool1d: each value placed at its index, zeros elsewhere."""
    _argcheck.tensor("max_unpool1d", "input", input, 1)
    _argcheck.tensor("max_unpool1d", "indices", indices, 2)
    return _C._max_unpool1d(input, indices, _unpool_size(input, kernel_size, stride, padding, output_size, 1))


def max_unpool2d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """The inverse of max_pool2d: each value placed at its index, zeros elsewhere."""
    _argcheck.tensor("max_unpool2d", "input", input, 1)
    _argcheck.tensor("max_unpool2d", "indices", indices, 2)
    return _C._max_unpool2d(input, indices, _unpool_size(input, kernel_size, stride, padding, output_size, 2))


def max_unpool3d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """The inverse of max_pool3d: each value placed at its index, zeros elsewhere."""
    _argcheck.tensor("max_unpool3d", "input", input, 1)
    _argcheck.tensor("max_unpool3d", "indices", indices, 2)
    return _C._max_unpool3d(input, indices, _unpool_size(input, kernel_size, stride, padding, output_size, 3))


def lp_pool1d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """(sum over the window of x ** p) ** (1 / p), as PyTorch computes it (through avg_pool1d)."""
    _argcheck.tensor("lp_pool1d", "input", input, 1)
    out = avg_pool1d(input.pow(norm_type), kernel_size, stride, 0, ceil_mode)
    return (out.sign() * relu(out.abs())).mul(kernel_size).pow(1.0 / norm_type)


def lp_pool2d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """(sum over the window of x ** p) ** (1 / p), as PyTorch computes it (through avg_pool2d)."""
    _argcheck.tensor("lp_pool2d", "input", input, 1)
    kh, kw = _tuple(kernel_size, 2)
    out = avg_pool2d(input.pow(norm_type), kernel_size, stride, 0, ceil_mode)
    return (out.sign() * relu(out.abs())).mul(kh * kw).pow(1.0 / norm_type)


# ---- fractional max pooling (Graham, "Fractional Max-Pooling", 2014) ----

def _fractional_starts(sample, in_size, out_size, pool):
    """Window starts along one dim for each plane's sample u in [0, 1): floor((i + u) * a) - floor(u * a)
    with a = (in - pool) / (out - 1), and the last window ending at the input's end. The arithmetic
    is in the sample's dtype (as PyTorch computes it), so float32 and float64 give PyTorch's windows."""
    import loom
    n, c = sample.shape[0], sample.shape[1]
    if out_size == 1:
        return loom.full((n, c, 1), in_size - pool, dtype=loom.int64, device=sample.device)
    np_dtype = "float32" if sample.dtype == loom.float32 else "float64"
    import numpy as np
    alpha = float(np.array(in_size - pool, dtype=np_dtype) / np.array(out_size - 1, dtype=np_dtype))
    i = loom.arange(out_size - 1, dtype=sample.dtype, device=sample.device)
    u = sample.unsqueeze(-1)
    starts = ((i + u) * alpha).to(loom.int64) - (u * alpha).to(loom.int64)
    last = loom.full((n, c, 1), in_size - pool, dtype=loom.int64, device=sample.device)
    return loom.cat([starts, last], -1)


def _fractional_max_pool(name, k, input, kernel_size, output_size, output_ratio, return_indices, _random_samples):
    import loom
    _argcheck.tensor(name, "input", input, 1)
    if input.dim() not in (k + 1, k + 2):
        raise RuntimeError(f"{name}: Expected {k + 1}D or {k + 2}D tensor, but got: {list(input.shape)}")
    kernel = _tuple(kernel_size, k)
    if output_size is None and output_ratio is None:
        raise ValueError(f"{name} requires specifying either an output_size or an output_ratio")
    spatial = list(input.shape[-k:])
    if output_size is None:
        ratio = _tuple(output_ratio, k)
        output_size = [int(s * r) for s, r in zip(spatial, ratio)]
    out = list(_tuple(output_size, k))
    for d in range(k):
        if out[d] + kernel[d] - 1 > spatial[d]:
            raise RuntimeError(f"{name}(): pool size {kernel[d]} too large relative to input size {spatial[d]} "
                               f"and output size {out[d]}")
    batched = input.dim() == k + 2
    x = input if batched else input.unsqueeze(0)
    n, c = x.shape[0], x.shape[1]
    if _random_samples is None:
        _random_samples = loom.rand(n, c, k, dtype=input.dtype, device=input.device)
    samples = _random_samples.to(device=input.device)
    # PyTorch reads the first N rows (its own tests pass a (2, C, 3) draw for an unbatched input)
    if samples.dim() != 3 or samples.shape[0] < n or tuple(samples.shape[1:]) != (c, k):
        raise RuntimeError(f"{name}: expected _random_samples of shape {[n, c, k]}, got {list(samples.shape)}")
    samples = samples[:n]
    # PyTorch's sample order: the last spatial dim takes sample 0 in 2-d (W, H), the dims in order in 3-d (T, H, W)
    order = [1, 0] if k == 2 else list(range(k))
    flat = None   # flat index within a plane of every window element, dims (N, C, o1, k1, o2, k2, ...)
    stride = 1
    for d in reversed(range(k)):
        starts = _fractional_starts(samples[:, :, order[d]], spatial[d], out[d], kernel[d])   # (N, C, o_d)
        pos = starts.unsqueeze(-1) + loom.arange(kernel[d], dtype=loom.int64, device=input.device)  # (N, C, o_d, k_d)
        shape = [n, c] + [1] * (2 * k)
        shape[2 + 2 * d], shape[3 + 2 * d] = out[d], kernel[d]
        term = pos.reshape(shape) * stride
        flat = term if flat is None else flat + term
        stride *= spatial[d]
    flat = flat.expand([n, c] + [v for d in range(k) for v in (out[d], kernel[d])])
    # windows last: (N, C, o1, o2, ..., k1*k2*...)
    perm = [0, 1] + [2 + 2 * d for d in range(k)] + [3 + 2 * d for d in range(k)]
    window = 1
    for kd in kernel:
        window *= kd
    flat = flat.permute(perm).reshape([n, c] + out + [window])
    values = x.reshape(n, c, -1).gather(2, flat.reshape(n, c, -1)).reshape([n, c] + out + [window])
    result, arg = values.max(-1)
    if not batched:
        result = result.squeeze(0)
    if not return_indices:
        return result
    indices = flat.gather(-1, arg.unsqueeze(-1)).squeeze(-1)
    return result, (indices if batched else indices.squeeze(0))


def fractional_max_pool2d(input, kernel_size, output_size=None, output_ratio=None, return_indices=False,
                          _random_samples=None):
    """The maxima of pseudo-random overlapping windows of size kernel_size whose starts follow
    Graham's sequence for each (sample, channel) plane; `_random_samples` (N, C, 2) fixes the
    draws (uniform in [0, 1), drawn from the random stream when not given)."""
    return _fractional_max_pool("fractional_max_pool2d", 2, input, kernel_size, output_size, output_ratio,
                                return_indices, _random_samples)


def fractional_max_pool3d(input, kernel_size, output_size=None, output_ratio=None, return_indices=False,
                          _random_samples=None):
    """fractional_max_pool2d over (T, H, W); `_random_samples` is (N, C, 3)."""
    return _fractional_max_pool("fractional_max_pool3d", 3, input, kernel_size, output_size, output_ratio,
                                return_indices, _random_samples)


def fractional_max_pool2d_with_indices(input, kernel_size, output_size=None, output_ratio=None,
                                       return_indices=False, _random_samples=None):
    return fractional_max_pool2d(input, kernel_size, output_size, output_ratio, True, _random_samples)


def fractional_max_pool3d_with_indices(input, kernel_size, output_size=None, output_ratio=None,
                                       return_indices=False, _random_samples=None):
    return fractional_max_pool3d(input, kernel_size, output_size, output_ratio, True, _random_samples)
