"""Padding layers (torch.nn.modules.padding): constant, zero, reflection, replication and
circular padding in 1, 2 and 3 dims, through F.pad."""

from loom.nn import functional as F
from loom.nn.modules.module import Module


class _PadNd(Module):
    _dims = 0
    mode = "constant"

    def __init__(self, padding):
        super().__init__()
        n = 2 * self._dims
        self.padding = tuple(padding) if isinstance(padding, (list, tuple)) else (padding,) * n
        if len(self.padding) != n:
            raise ValueError(f"{type(self).__name__}: padding must be an int or a tuple of {n} ints, got "
                             f"{padding!r}")

    def forward(self, input):
        return F.pad(input, self.padding, self.mode)

    def extra_repr(self):
        return f"{self.padding}"


class _ConstantPadNd(_PadNd):
    def __init__(self, padding, value):
        super().__init__(padding)
        self.value = value

    def forward(self, input):
        return F.pad(input, self.padding, "constant", self.value)

    def extra_repr(self):
        return f"padding={self.padding}, value={self.value}"


class ConstantPad1d(_ConstantPadNd):
    _dims = 1


class ConstantPad2d(_ConstantPadNd):
    _dims = 2


class ConstantPad3d(_ConstantPadNd):
    _dims = 3


class _ZeroPadNd(_ConstantPadNd):
    def __init__(self, padding):
        super().__init__(padding, 0.0)

    def extra_repr(self):
        return f"{self.padding}"


class ZeroPad1d(_ZeroPadNd):
    _dims = 1


class ZeroPad2d(_ZeroPadNd):
    _dims = 2


class ZeroPad3d(_ZeroPadNd):
    _dims = 3


class ReflectionPad1d(_PadNd):
    _dims, mode = 1, "reflect"


class ReflectionPad2d(_PadNd):
    _dims, mode = 2, "reflect"


class ReflectionPad3d(_PadNd):
    _dims, mode = 3, "reflect"


class ReplicationPad1d(_PadNd):
    _dims, mode = 1, "replicate"


class ReplicationPad2d(_PadNd):
    _dims, mode = 2, "replicate"


class ReplicationPad3d(_PadNd):
    _dims, mode = 3, "replicate"


class CircularPad1d(_PadNd):
    _dims, mode = 1, "circular"


class CircularPad2d(_PadNd):
    _dims, mode = 2, "circular"


class CircularPad3d(_PadNd):
    _dims, mode = 3, "circular"
