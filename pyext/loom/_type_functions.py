"""torch.typename, torch.is_storage and torch.set_default_tensor_type: the type-level helpers
programs call (serialization code, older training scripts)."""

import loom


def typename(obj):
    """A tensor's legacy type name ("torch.FloatTensor"), else the qualified name of obj (a class
    or function) or of its class, without a "builtins." prefix: typename(3) is "int"."""
    if isinstance(obj, loom.Tensor):
        return obj.type()
    module = getattr(obj, "__module__", None)
    prefix = f"{module}." if module not in (None, "builtins", "__builtin__") else ""
    for attribute in ("__qualname__", "__name__"):
        name = getattr(obj, attribute, None)
        if isinstance(name, str):
            return prefix + name
    return prefix + type(obj).__name__


def is_storage(obj):
    """Whether obj is a storage object. loom's tensors own their memory without separate storage
    objects (none of PyTorch's Storage classes exists), so nothing is one: always False."""
    return False


def set_default_tensor_type(t):
    """Sets the default dtype (and, for a loom.cuda class, the default device) from a legacy
    tensor class or its name: set_default_tensor_type(loom.DoubleTensor) or
    ("torch.cuda.FloatTensor"). Only floating-point classes, as in PyTorch. A CPU class moves a
    default device of "cuda" back to the CPU and leaves "lazy" (loom.FloatTensor makes lazy
    tensors too)."""
    if isinstance(t, str):
        t = _class_named(t)
    dtype, is_cuda = getattr(t, "dtype", None), getattr(t, "is_cuda", None)
    if not isinstance(dtype, loom.dtype) or is_cuda is None:
        raise TypeError(f"invalid type object: expected a legacy tensor class such as torch.FloatTensor, got {t!r}")
    if not dtype.is_floating_point:
        raise TypeError("only floating-point types are supported as the default type")
    loom.set_default_dtype(dtype)
    device = loom.get_default_device()
    if is_cuda:
        loom.set_default_device("cuda")
    elif device is not None and device.type == "cuda":
        loom.set_default_device("cpu")


def _class_named(name):
    parts = name.split(".")
    if parts[0] not in ("torch", "loom") or len(parts) not in (2, 3) or (len(parts) == 3 and parts[1] != "cuda"):
        raise ValueError(f"invalid type: '{name}' (expected a name such as 'torch.FloatTensor' or "
                         f"'torch.cuda.FloatTensor')")
    module = loom.cuda if len(parts) == 3 else loom
    cls = getattr(module, parts[-1], None)
    if cls is None or not hasattr(cls, "is_cuda"):
        raise AttributeError(f"module '{'.'.join(parts[:-1])}' has no attribute '{parts[-1]}'")
    return cls
