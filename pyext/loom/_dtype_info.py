"""torch.finfo and torch.iinfo: the numeric limits of loom's dtypes, and torch.can_cast.

Values come from numpy's limits for the dtypes numpy has; bfloat16 (8 exponent bits, 7 stored
mantissa bits) is written out, as numpy has no such type."""

import numpy as np

from loom import _C

# numpy's type of each loom dtype with one (bfloat16 has none).
_NUMPY = {"float16": np.float16, "float32": np.float32, "float64": np.float64, "uint8": np.uint8,
          "int8": np.int8, "int16": np.int16, "int32": np.int32, "int64": np.int64}

_BFLOAT16 = dict(bits=16, eps=2.0 ** -7, max=float.fromhex("0x1.fep127"), tiny=2.0 ** -126,
                 smallest_normal=2.0 ** -126, resolution=0.01)


def _name(dtype):
    return str(dtype).split(".")[-1]


class finfo:
    """finfo(dtype=None): bits, eps, max, min, tiny (= smallest_normal) and resolution of a
    floating dtype (the default dtype when none is given)."""

    def __init__(self, type=None):  # noqa: A002  (PyTorch's parameter name)
        dtype = _C.get_default_dtype() if type is None else type
        if not isinstance(dtype, _C.dtype) or not dtype.is_floating_point:
            raise TypeError(f"torch.finfo() requires a floating point input type. Use torch.iinfo to handle "
                            f"'{_name(dtype) if isinstance(dtype, _C.dtype) else dtype}'")
        self.dtype = _name(dtype)
        if self.dtype == "bfloat16":
            info = _BFLOAT16
        else:
            f = np.finfo(_NUMPY[self.dtype])
            info = dict(bits=f.bits, eps=float(f.eps), max=float(f.max), tiny=float(f.tiny),
                        smallest_normal=float(f.tiny), resolution=10.0 ** -f.precision)
        self.bits = info["bits"]
        self.eps = info["eps"]
        self.max = info["max"]
        self.min = -info["max"]
        self.tiny = info["tiny"]
        self.smallest_normal = info["smallest_normal"]
        self.resolution = info["resolution"]

    def __repr__(self):
        return (f"finfo(resolution={self.resolution:g}, min={self.min:g}, max={self.max:g}, eps={self.eps:g}, "
                f"smallest_normal={self.smallest_normal:g}, tiny={self.tiny:g}, dtype={self.dtype})")


class iinfo:
    """iinfo(dtype): bits, min and max of an integer dtype (bool included, as PyTorch)."""

    def __init__(self, type):  # noqa: A002
        if not isinstance(type, _C.dtype) or type.is_floating_point:
            raise TypeError(f"torch.iinfo() requires an integer input type. Use torch.finfo to handle "
                            f"'{_name(type) if isinstance(type, _C.dtype) else type}'")
        self.dtype = _name(type)
        if self.dtype == "bool":
            self.bits, self.min, self.max = 8, 0, 1
        else:
            i = np.iinfo(_NUMPY[self.dtype])
            self.bits, self.min, self.max = i.bits, int(i.min), int(i.max)

    def __repr__(self):
        return f"iinfo(min={self.min}, max={self.max}, dtype={self.dtype})"


def _category(dtype):
    """0 bool, 1 integer, 2 floating: casts may not go down this order (can_cast)."""
    if dtype.is_floating_point:
        return 2
    return 0 if _name(dtype) == "bool" else 1


def can_cast(from_, to):
    """Whether PyTorch's type promotion allows a cast from `from_` to `to` (an in-place op's
    result written into its input): never from floating to integral or bool, nor from integral to
    bool; any width within a category."""
    for name, d in (("from", from_), ("to", to)):
        if not isinstance(d, _C.dtype):
            raise TypeError(f"can_cast(): argument '{name}' must be torch.dtype, not {type(d).__name__}")
    return _category(from_) <= _category(to)
