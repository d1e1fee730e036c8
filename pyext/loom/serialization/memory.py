"""A tensor's memory as bytes, for the serializers: the span of its storage a tensor addresses,
read and written in place, in every dtype (bfloat16 included, which numpy lacks).

A materialized tensor on the host (device "cpu" or "lazy:cpu") is a layout over one block of
memory; data_ptr() is the address of its first element, the lowest one, since strides are never
negative. Every byte between its first and its last element belongs to its storage, so that span
can be read (and, for a tensor this code made, written) through its address. A lazy tensor's
data_ptr() syncs it first.
"""

import ctypes
import sys

import numpy as np

import loom

_DTYPES = {d: str(d).split(".", 1)[1] for d in (loom.bool, loom.uint8, loom.int8, loom.int16, loom.int32, loom.int64,
                                                 loom.float16, loom.bfloat16, loom.float32, loom.float64)}
_BY_NAME = {name: d for d, name in _DTYPES.items()}


def dtype_name(dtype):
    """'float32' for loom.float32."""
    return _DTYPES[dtype]


def dtype_by_name(name):
    """loom.float32 for 'float32'; ValueError for a name that is not one of loom's dtypes."""
    dtype = _BY_NAME.get(name) if isinstance(name, str) else None
    if dtype is None:
        raise ValueError(f"{name!r} is not one of loom's dtypes ({', '.join(_BY_NAME)})")
    return dtype


def on_host(t):
    """Whether t's memory is host memory (devices "cpu" and "lazy:cpu")."""
    return not t.is_cuda


def element_span(t):
    """How many storage elements lie from t's first element to its last, both included (0 when t
    has no elements)."""
    if t.numel() == 0:
        return 0
    return 1 + sum((n - 1) * s for n, s in zip(t.shape, t.stride()))


def _view(address, nbytes, keep_alive):
    raw = (ctypes.c_char * nbytes).from_address(address)
    raw.keep_alive = keep_alive  # the memoryview holds raw, raw holds the tensor that owns the memory
    return memoryview(raw).cast("B")


def read_view(t, count):
    """A read-only view of `count` elements of t's storage from t's first element on (t on the
    host, count at most element_span(t) unless the caller knows the storage is longer)."""
    if count == 0:
        return memoryview(b"")
    return _view(t.data_ptr(), count * t.element_size(), t).toreadonly()


def write_view(t):
    """A writable view of the bytes of t, a contiguous tensor on the host."""
    if not t.is_contiguous() or not on_host(t):
        raise ValueError("write_view needs a contiguous tensor in host memory")
    if t.numel() == 0:
        return memoryview(bytearray())
    return _view(t.data_ptr(), t.numel() * t.element_size(), t)


def byteswap(t):
    """Reverses the bytes of each element of t (a contiguous host tensor) in place: a file written
    on a machine of the other byte order."""
    size = t.element_size()
    if size > 1 and t.numel():
        np.frombuffer(write_view(t), dtype=f"u{size}").byteswap(inplace=True)


NATIVE_BYTEORDER = sys.byteorder
