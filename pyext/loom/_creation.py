"""Creation functions written in Python over the C++ ones: logspace, range (PyTorch's deprecated
inclusive one), scalar_tensor, empty_strided and Tensor.new_empty_strided. Each computes its
values as PyTorch does (in float64, then converted to the dtype), so results match it."""

import math
import numbers
import warnings

import loom


def _placed(t, dtype, device, requires_grad):
    """t (float64 on the CPU) converted to dtype and moved to device, a leaf."""
    t = t.to(dtype=dtype)
    if device is not None:
        t = t.to(device)
    if requires_grad:
        t.requires_grad_(True)
    return t


def _number(value, name):
    if isinstance(value, loom.Tensor):
        return value.item()
    if not isinstance(value, numbers.Number) or isinstance(value, complex):
        raise TypeError(f"{name}(): argument must be a real number, not {type(value).__name__}")
    return value


def logspace(start, end, steps, base=10.0, *, dtype=None, layout=None, device=None, requires_grad=False):
    """`steps` values from base**start to base**end, their exponents evenly spaced."""
    start, end, base = _number(start, "logspace"), _number(end, "logspace"), _number(base, "logspace")
    if not isinstance(steps, numbers.Integral) or isinstance(steps, bool):
        raise TypeError(f"logspace(): argument 'steps' must be int, not {type(steps).__name__}")
    if steps < 0:
        raise RuntimeError("number of steps must be non-negative")
    dtype = dtype or loom.get_default_dtype()
    if dtype == loom.bool:
        raise RuntimeError("\"logspace_cpu\" not implemented for 'Bool'")
    exponents = loom.linspace(start, end, steps, dtype=loom.float64)
    return _placed(loom.pow(float(base), exponents), dtype, device, requires_grad)


# Begins as PyTorch's warning does, so that a program's warning filters for it match loom's too.
_RANGE_DEPRECATED = ("torch.range is deprecated: it includes `end`, unlike Python's range; use "
                     "torch.arange, whose values stop before `end`.")


def range(start, end, step=1, *, dtype=None, layout=None, device=None, requires_grad=False):  # noqa: A001
    """PyTorch's deprecated torch.range: start, start + step, ... up to end INCLUDED (warns, as
    PyTorch does; loom.arange excludes end). The default dtype is the default float dtype; out= (added
    at import by loom/_out.py) gives out's dtype and device."""
    warnings.warn(_RANGE_DEPRECATED, UserWarning, stacklevel=3)  # past loom/_out.py's wrapper, to the caller
    start, end, step = (float(_number(v, "range")) for v in (start, end, step))
    if not (math.isfinite(start) and math.isfinite(end)):
        raise RuntimeError(f"unsupported range: {start:g} -> {end:g}")
    if step == 0:
        raise RuntimeError("step must be nonzero")
    if (step > 0 and end < start) or (step < 0 and end > start):
        raise RuntimeError("upper bound and lower bound inconsistent with step sign")
    size = int(math.floor((end - start) / step)) + 1
    values = loom.arange(size, dtype=loom.float64) * step + start
    return _placed(values, dtype or loom.get_default_dtype(), device, requires_grad)  # out=: loom/_out.py


def scalar_tensor(s, *, dtype=None, layout=None, device=None, requires_grad=False, pin_memory=False):
    """A 0-d tensor holding s, of the default float dtype unless dtype says otherwise."""
    if isinstance(s, loom.Tensor):
        if s.numel() != 1:
            raise RuntimeError("scalar_tensor(): a Tensor argument must have one element, got "
                               f"{s.numel()}")
        s = s.item()
    if not isinstance(s, numbers.Number) or isinstance(s, complex):
        raise TypeError(f"scalar_tensor(): argument 's' (position 1) must be Number, not {type(s).__name__}")
    if dtype is not None and not isinstance(dtype, loom.dtype):
        raise TypeError(f"scalar_tensor(): argument 'dtype' must be torch.dtype, not {type(dtype).__name__}")
    dtype = dtype or loom.get_default_dtype()
    if isinstance(s, bool) or dtype == loom.bool or not isinstance(s, numbers.Integral) or dtype.is_floating_point:
        value = loom.tensor(s, dtype=loom.float64 if not isinstance(s, bool) else loom.bool)
    else:
        value = loom.tensor(int(s), dtype=loom.int64)
    if dtype.is_floating_point and value.dtype == loom.float64 and math.isfinite(float(s)):
        limit = _FLOAT_MAX[dtype]
        if abs(float(s)) > limit:
            raise RuntimeError(f"value cannot be converted to type {_c_name(dtype)} without overflow")
    return _placed(value, dtype, device, requires_grad)


_FLOAT_MAX = {loom.float16: 65504.0, loom.bfloat16: 3.3895313892515355e38, loom.float32: 3.4028234663852886e38,
              loom.float64: float("inf")}


def _c_name(dtype):
    return {loom.float32: "float", loom.float64: "double", loom.float16: "at::Half",
            loom.bfloat16: "at::BFloat16"}.get(dtype, str(dtype))


def _storage_span(size, stride):
    """How many elements a tensor of size and stride addresses (0 when it is empty)."""
    if any(s == 0 for s in size):
        return 0
    return 1 + sum((n - 1) * st for n, st in zip(size, stride))


def _strided(size, stride, dtype, device, requires_grad, what):
    size, stride = tuple(int(s) for s in size), tuple(int(s) for s in stride)
    if len(size) != len(stride):
        raise RuntimeError(f"dimensionality of sizes ({len(size)}) must match dimensionality of strides "
                           f"({len(stride)})")
    for n in size:
        if n < 0:
            raise RuntimeError(f"Trying to create tensor with negative dimension {n}: {list(size)}")
    if any(st < 0 for st in stride):
        raise RuntimeError(f"Storage size calculation overflowed with sizes={list(size)} and strides={list(stride)}")
    storage = loom.empty(_storage_span(size, stride), dtype=dtype, device=device)
    t = storage._as_strided(size, stride, 0).detach()
    if requires_grad:
        t.requires_grad_(True)
    return t


def empty_strided(size, stride, *, dtype=None, layout=None, device=None, requires_grad=False, pin_memory=False):
    """Uninitialized memory viewed with the given size and stride (elements may overlap where a
    stride is 0, as in PyTorch)."""
    return _strided(size, stride, dtype or loom.get_default_dtype(), device, requires_grad, "empty_strided")


def new_empty_strided(self, size, stride, *, dtype=None, layout=None, device=None, requires_grad=False,
                      pin_memory=False):
    """Tensor.new_empty_strided: empty_strided in self's dtype and on its device unless given."""
    return _strided(size, stride, dtype or self.dtype, device if device is not None else self.device,
                    requires_grad, "new_empty_strided")


def new_empty_strided_method(self, args, kwargs):
    """Tensor.new_empty_strided's entry (pyext/tensor_methods.cpp)."""
    return new_empty_strided(self, *args, **kwargs)


def asarray(obj, *, dtype=None, device=None, copy=None, requires_grad=False):
    """obj as a tensor, sharing its memory where it can (PyTorch's asarray): a tensor is returned
    itself unless dtype or device differ (then converted) or copy=True; numpy arrays and buffers
    are shared (as_tensor), sequences copied. copy=False refuses to copy. requires_grad=True sets
    it on the result (on obj itself when that is returned, as PyTorch does)."""
    if isinstance(obj, loom.Tensor):
        converts = (dtype is not None and dtype != obj.dtype) or \
            (device is not None and loom.device(device) != obj.device)
        if converts and copy is False:
            raise ValueError(f"asarray(): can't alias a {obj.dtype} tensor on {obj.device} as dtype={dtype}, "
                             f"device={device} without copying (copy=False)")
        t = obj.to(dtype=dtype or obj.dtype, device=device or obj.device) if converts else obj
        if copy and t is obj:
            t = obj.clone()
    elif copy:
        t = loom.tensor(obj, dtype=dtype, device=device)
    else:
        t = loom.as_tensor(obj, dtype=dtype, device=device)
    if requires_grad:
        t.requires_grad_(True)
    return t


def frombuffer(buffer, *, dtype, count=-1, offset=0, requires_grad=False):
    """A 1-d tensor over an object's buffer (bytes after `offset`, `count` elements or all),
    sharing its memory: writes through either are seen by the other."""
    import numpy as np
    view = memoryview(buffer).cast("B")
    available = len(view) - offset
    if count == 0 or (count < 0 and available <= 0):
        raise ValueError(f"both buffer length ({len(view)}) and count ({count}) must not be 0")
    if offset < 0 or offset > len(view):
        raise ValueError(f"offset ({offset} bytes) must be non-negative and no greater than buffer length "
                         f"({len(view)} bytes) minus 1")
    size = dtype.itemsize
    if count < 0:
        if available % size:
            raise ValueError(f"buffer length ({available} bytes) after offset ({offset} bytes) must be a multiple of "
                             f"element size ({size})")
        count = available // size
    elif count * size > available:
        raise ValueError(f"requested buffer length ({count} * {size} bytes) after offset ({offset} bytes) must not be "
                         f"greater than actual buffer length ({len(view)} bytes)")
    raw = np.frombuffer(view, dtype=np.uint8, count=count * size, offset=offset)
    t = loom.as_tensor(raw).view(dtype)
    if requires_grad:
        t.requires_grad_(True)
    return t


def to_dlpack(tensor):
    """A DLPack capsule of tensor's memory (tensor.__dlpack__()), for from_dlpack of another
    library."""
    return tensor.__dlpack__()
