"""Where loaded storages go: PyTorch's map_location.

A checkpoint tags each storage with the device it was saved from ("cpu", "cuda:0"). Storages are
read into host memory and then placed: map_location None keeps the saved device; a device
("cpu", "lazy", "cuda:1", a loom.device) takes every storage there; a dict maps saved tags to
devices (tags it does not name keep theirs); a callable gets (storage, tag) and returns the
storage placed (or None for the default). A storage is a 1-d tensor of its elements; moving it
once and viewing the moved one keeps the tensors of one storage sharing it on any device.
"""

import loom


def _default(storage, location):
    if location == "cpu":
        return storage
    if location == "cuda" or location.startswith("cuda:"):
        if not loom.cuda.is_available():
            raise RuntimeError("Attempting to deserialize object on a CUDA device but loom.cuda.is_available() is "
                               "False. If you are running on a CPU-only machine, please use loom.load with "
                               "map_location='cpu' to map your storages to the CPU.")
        return storage.to(location)
    if location == "lazy" or location.startswith("lazy:"):
        return storage.to(location)
    raise RuntimeError(f"the checkpoint holds a storage saved on device {location!r}, which loom does not have: "
                       "pass map_location='cpu' (or another device of loom's) to loom.load")


def _to(storage, target):
    target = str(target)
    return storage if target == "cpu" else _default(storage, target)


def restorer(map_location):
    """A function (storage, location tag) -> the storage where map_location puts it."""
    if map_location is None:
        return _default
    if isinstance(map_location, (str, loom.device)):
        return lambda storage, location: _to(storage, map_location)
    if isinstance(map_location, dict):
        return lambda storage, location: _to(storage, map_location.get(location, location))
    if callable(map_location):
        def restore(storage, location):
            result = map_location(storage, location)
            if result is None:
                return _default(storage, location)
            if (not isinstance(result, loom.Tensor) or result.dtype is not storage.dtype
                    or tuple(result.shape) != tuple(storage.shape)):
                raise TypeError(f"map_location returned {type(result).__name__} for a storage of "
                                f"{storage.numel()} {storage.dtype} elements: it must return the storage (a 1-d "
                                "tensor of the same dtype and size) on the device of its choice, or None")
            return result
        return restore
    raise TypeError(f"map_location must be None, a device, a string, a dict or a callable, not "
                    f"{type(map_location).__name__}")
