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
