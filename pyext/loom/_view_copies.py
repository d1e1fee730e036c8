"""The copying forms of views and splits, as torch.view_copy, torch.permute_copy, ...: the view's
values in a tensor of their own (contiguous), with the view's gradient. Functionalized programs
and op suites call them. Also concatenate (cat's numpy name), fill, and real / imag of loom's
real tensors."""

import loom
from loom import _argcheck


def _copy_of(name, view):
    def copy(input, *args, **kwargs):
        _argcheck.tensor(name, "input", input, 1)
        result = view(input, *args, **kwargs)
        if isinstance(result, (tuple, list)):
            return tuple(t.clone(memory_format=loom.contiguous_format) for t in result)
        return result.clone(memory_format=loom.contiguous_format)
    copy.__name__ = copy.__qualname__ = name
    copy.__doc__ = f"{name}(input, ...): a copy of input.{name[:-5]}(...) (contiguous, not a view)."
    return copy


def _method(name):
    return lambda input, *args, **kwargs: getattr(input, name)(*args, **kwargs)


def _slice(input, dim=0, start=None, end=None, step=1):
    return input[(slice(None),) * (dim % max(input.dim(), 1)) + (slice(start, end, step),)]


_VIEWS = {
    "alias_copy": lambda input: input.view(input.shape),
    "as_strided_copy": _method("as_strided"),
    "detach_copy": _method("detach"),
    "diagonal_copy": _method("diagonal"),
    "expand_copy": lambda input, size, *, implicit=False: input.expand(size),
    "permute_copy": _method("permute"),
    "select_copy": _method("select"),
    "slice_copy": _slice,
    "split_copy": _method("split"),
    "split_with_sizes_copy": _method("split"),
    "squeeze_copy": _method("squeeze"),
    "t_copy": _method("t"),
    "transpose_copy": _method("transpose"),
    "unbind_copy": _method("unbind"),
    "unfold_copy": _method("unfold"),
    "unsqueeze_copy": _method("unsqueeze"),
    "view_copy": _method("view"),
}
globals().update({name: _copy_of(name, view) for name, view in _VIEWS.items()})


def concatenate(tensors, dim=0):
    """cat under numpy's name."""
    if isinstance(tensors, loom.Tensor):
        raise TypeError("concatenate(): argument 'tensors' (position 1) must be tuple of Tensors, not Tensor")
    return loom.cat(tensors, dim)


def fill(input, value):
    """A tensor of input's shape and dtype with every element `value` (a number or a 0-d tensor,
    whose gradient is the sum of the result's)."""
    _argcheck.tensor("fill", "input", input, 1)
    if isinstance(value, loom.Tensor):
        if value.dim() != 0:
            raise RuntimeError(f"fill_ only supports 0-dimension value tensor but got tensor with {value.dim()} "
                               f"dimensions")
        return value.to(input.dtype).expand(input.shape).clone()
    return input.clone().fill_(value)  # a result of input's (gradient zero), as PyTorch's


def real(input):
    """The real part: loom's tensors are real, so input itself (as PyTorch returns a real tensor)."""
    if not isinstance(input, loom.Tensor):
        raise TypeError(f"real(): argument 'input' must be Tensor, not {type(input).__name__}")
    return input


def imag(input):
    """PyTorch's imag of a real tensor is an error; loom has no complex tensors."""
    if not isinstance(input, loom.Tensor):
        raise TypeError(f"imag(): argument 'input' must be Tensor, not {type(input).__name__}")
    raise RuntimeError(f"imag is not implemented for tensors with non-complex dtypes (got {input.dtype})")


__all__ = list(_VIEWS) + ["concatenate", "fill", "real", "imag"]
