"""Argument helpers of the layers, under the names torch.nn.modules.utils gives them (custom
layers import _pair and _ntuple from there): a size given once or per dimension, as a tuple."""

import collections.abc
import itertools


def _ntuple(n, name="parse"):
    """A function turning a value into an n-tuple: an iterable as its tuple, anything else repeated n times."""
    def parse(x):
        if isinstance(x, collections.abc.Iterable) and not isinstance(x, str):
            return tuple(x)
        return tuple(itertools.repeat(x, n))
    parse.__name__ = name
    return parse


_single = _ntuple(1, "_single")
_pair = _ntuple(2, "_pair")
_triple = _ntuple(3, "_triple")
_quadruple = _ntuple(4, "_quadruple")


def _tuple_of(value, n):
    """value as an n-tuple (what layers store for kernel_size, stride, ...)."""
    return _ntuple(n)(value)


def _reverse_repeat_tuple(t, n):
    """Each element of t repeated n times, in reverse order of t (padding for F.pad from a per-dim size)."""
    return tuple(x for x in reversed(t) for _ in range(n))


def _list_with_default(out_size, defaults):
    """out_size with its None entries taken from the trailing entries of defaults (adaptive pooling)."""
    if isinstance(out_size, int):
        return out_size
    if len(defaults) <= len(out_size):
        raise ValueError(f"Input dimension should be at least {len(out_size) + 1}")
    return [v if v is not None else d for v, d in zip(out_size, defaults[-len(out_size):])]
