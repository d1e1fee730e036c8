"""skip_init (torch.nn.utils.init): a module built without paying for its initialization."""

import inspect

__all__ = ["skip_init"]


def skip_init(module_cls, *args, **kwargs):
    """module_cls(*args, **kwargs) whose parameter and buffer values are unspecified.

    PyTorch builds the module on its "meta" device (no storage, nothing initialized) and then
    allocates uninitialized storage on the requested device. loom has no meta device: the module
    is built on the requested device and its storage replaced by uninitialized storage of the same
    shapes (Module.to_empty), which is what the caller may rely on: shapes, dtypes, devices and
    registration, not values."""
    if not isinstance(module_cls, type):
        raise RuntimeError(f"Expected a Module class; got {module_cls}")
    if "device" not in inspect.signature(module_cls).parameters:
        raise RuntimeError("Module must support a 'device' arg to skip initialization")
    device = kwargs.pop("device", "cpu")
    return module_cls(*args, device=device, **kwargs).to_empty(device=device)
