"""PyTorch's legacy tensor constructors: loom.Tensor(...), Tensor.new(...) and the typed classes
loom.FloatTensor, loom.LongTensor, ... (loom.cuda.FloatTensor, ... on a GPU).

Each takes the forms PyTorch's legacy constructor takes, with its errors:
    Tensor()                          an empty 1-d tensor
    Tensor(*sizes) / Tensor(size)     uninitialized memory of that shape (sizes: ints or a loom.Size)
    Tensor(data)                      a copy of a sequence (list, tuple, numpy array), converted
    Tensor(other)                     a tensor sharing other's memory (PyTorch's alias)
each with `device=` as a keyword. loom.Tensor makes the default dtype (loom.get_default_dtype());
a typed class makes its own, and refuses a tensor of another dtype. Tensor.new makes the calling
tensor's dtype on its device.

The typed classes are not subclasses of loom.Tensor, as in PyTorch: isinstance(t, FloatTensor)
asks whether t is a float32 tensor on the CPU (a lazy one on the CPU counts; a GPU's tensors are
loom.cuda.FloatTensor's). Unlike PyTorch, loom.FloatTensor also makes lazy tensors (device="lazy"):
a program whose device is "lazy" runs unchanged.
"""

import numbers

import loom

_FORMS = ("new() received an invalid combination of arguments - got ({got}), but expected one of:\n"
          " * (*, torch.device device)\n"
          " * (Tensor other)\n"
          " * (tuple of ints size, *, torch.device device)\n"
          " * (object data, *, torch.device device)")


def _type_name(value):
    """PyTorch's name of an argument's type in its messages: 'int', 'torch.dtype'."""
    kind = type(value)
    return kind.__name__ if kind.__module__ == "builtins" else f"torch.{kind.__name__}"


def _described(args, kwargs):
    parts = [_type_name(a) for a in args] + [f"{k}={_type_name(v)}" for k, v in kwargs.items()]
    return ", ".join(parts)


def _is_size_element(value):
    return isinstance(value, numbers.Integral) and not isinstance(value, bool) and not isinstance(value, loom.Tensor)


def _physical_type(device):
    """'cpu' or 'cuda': where a device's memory is (a lazy device's backend)."""
    return "cuda" if loom.device(device).type == "cuda" or str(device).startswith("lazy:cuda") else (
        "cuda" if str(device) == "lazy" and loom.cuda.is_available() else "cpu")


def construct(dtype, device, args, kwargs, *, typed, cuda=False):
    """The legacy constructor's result: dtype and device are the defaults of the form used
    (None: the default dtype / the default device); `typed` makes other dtypes an error."""
    unknown = set(kwargs) - {"device", "size", "data"}
    if unknown or ("size" in kwargs or "data" in kwargs) and (args or len(set(kwargs) - {"device"}) > 1):
        raise TypeError(_FORMS.format(got=_described(args, kwargs)))
    if "device" in kwargs and kwargs["device"] is not None:
        device = kwargs["device"]
        if typed and _physical_type(device) != ("cuda" if cuda else "cpu"):
            raise RuntimeError(f"legacy constructor expects device type: {'cuda' if cuda else 'cpu'} but device type: "
                               f"{_physical_type(device)} was passed")
    if "size" in kwargs:
        args = tuple(kwargs["size"]) if not _is_size_element(kwargs["size"]) else (kwargs["size"],)
    elif "data" in kwargs:
        args = (kwargs["data"],)
    if dtype is None:
        dtype = loom.get_default_dtype()
    if not args:
        return loom.empty(0, dtype=dtype, device=device)
    first = args[0]
    if len(args) == 1 and isinstance(first, loom.Tensor):
        if typed and first.dtype != dtype:
            raise TypeError(f"expected {dtype} (got {first.dtype})")
        return first.view_as(first) if "device" not in kwargs else first.to(device).view_as(first)
    if isinstance(first, loom.Size) or _is_size_element(first):
        sizes = tuple(first) if isinstance(first, loom.Size) else args
        if isinstance(first, loom.Size) and len(args) > 1:
            raise TypeError(_FORMS.format(got=_described(args, kwargs)))
        for pos, s in enumerate(sizes, start=1):
            if not _is_size_element(s):
                raise TypeError(f"new(): argument 'size' must be tuple of ints, but found element of type "
                                f"{type(s).__name__} at pos {pos}")
        return loom.empty(tuple(int(s) for s in sizes), dtype=dtype, device=device)
    if len(args) > 1:
        raise TypeError(_FORMS.format(got=_described(args, kwargs)))
    if isinstance(first, (str, bytes)):
        raise TypeError(f"new(): invalid data type '{type(first).__name__}'")
    if not hasattr(first, "__len__") or not hasattr(first, "__getitem__") or getattr(first, "ndim", 1) == 0:
        kind = type(first)
        name = kind.__name__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__name__}"
        raise TypeError(f"new(): data must be a sequence (got {name})")
    return loom.tensor(first, dtype=dtype, device=device)


def tensor_new(cls, args, kwargs):
    """loom.Tensor(...) (and a Python subclass's, which makes an instance of that subclass)."""
    t = construct(None, None, args, kwargs, typed=False)
    if cls is not loom.Tensor:
        t = loom.Tensor._make_subclass(cls, t.detach())
    return t


def new_like(self, args, kwargs):
    """Tensor.new(...): the legacy constructor with self's dtype and device as defaults."""
    return construct(self.dtype, self.device, args, kwargs, typed=True, cuda=self.is_cuda)


class _TensorType(type):
    """The type of the typed legacy classes (PyTorch's torch.tensortype)."""

    def __call__(cls, *args, **kwargs):
        return construct(cls.dtype, "cuda" if cls.is_cuda else None, args, kwargs, typed=True, cuda=cls.is_cuda)

    def __instancecheck__(cls, obj):
        return isinstance(obj, loom.Tensor) and obj.dtype == cls.dtype and bool(obj.is_cuda) == cls.is_cuda

    def __repr__(cls):
        return f"<class '{cls.__module__}.{cls.__name__}'>"


_NAMES = {"FloatTensor": "float32", "DoubleTensor": "float64", "HalfTensor": "float16",
          "BFloat16Tensor": "bfloat16", "ByteTensor": "uint8", "CharTensor": "int8", "ShortTensor": "int16",
          "IntTensor": "int32", "LongTensor": "int64", "BoolTensor": "bool"}


def _typed_classes(cuda):
    module = "torch.cuda" if cuda else "torch"  # the names Tensor.type() returns
    return {name: _TensorType(name, (), {"__module__": module, "dtype": getattr(loom, dtype), "is_cuda": cuda,
                                         "is_sparse": False,
                                         "__doc__": f"{module}.{name}: {dtype} tensors (legacy constructor)"})
            for name, dtype in _NAMES.items()}


cpu_classes = _typed_classes(False)
cuda_classes = _typed_classes(True)
