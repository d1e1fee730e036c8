"""PyTorch's legacy checkpoint format (before PyTorch 1.6, and torch.save(...,
_use_new_zipfile_serialization=False) since), read only.

The file is five pickles and then the storages' bytes:

  MAGIC_NUMBER, PROTOCOL_VERSION (1001), sys_info ({"little_endian": ..., ...}),
  the object (storages as persistent ids ('storage', torch.FloatStorage, key, location, numel,
  None)), the list of storage keys;
  then, for each key in that order, its element count (8 bytes) and its bytes.

The storages' bytes come after the pickle that builds the tensors, so each storage is allocated
when the pickle names it (the sizes named so far must fit in the rest of the file), the tensors
are made as views of it on the host, then its bytes are read into it and, where map_location
moves it, every tensor made from it is moved with it (Tensor._set_data, which keeps the Python
objects). Every pickle goes through unpickler.py, weights_only included.
"""

import pickletools
import struct

import numpy as np

import loom
from loom.serialization import memory, unpickler

MAGIC_NUMBER = 0x1950A86A20F9469CFC6C
PROTOCOL_VERSION = 1001
_MAGIC_ARG = b"\x8a\x0a" + MAGIC_NUMBER.to_bytes(10, "little")  # LONG1 of the magic number


def is_legacy(head):
    """Whether a file starting with `head` (16 bytes at least) is in the legacy format: a pickle
    (PROTO) whose first value is the magic number."""
    return head[:1] == b"\x80" and head[2:14] == _MAGIC_ARG


class _Reader:
    """Pickles one after another from a Source, each scanned to its STOP before it is read."""

    def __init__(self, source, error):
        self.source, self.error = source, error

    def readline(self):
        line = bytearray()
        while not line.endswith(b"\n"):
            c = self.source.read(1)
            if not c:
                break
            line += c
        return bytes(line)

    def read(self, n):
        return self.source.read(n)

    def next_pickle(self, what):
        start = self.source.tell()
        try:
            for op, _, _ in pickletools.genops(self):
                if op.name == "STOP":
                    break
        except Exception as e:  # noqa: BLE001  genops raises ValueError and others on malformed input
            raise self.error(f"its {what} is not a valid pickle ({type(e).__name__}: {e})") from None
        end = self.source.tell()
        self.source.seek(start)
        data = self.source.read(end - start)
        return data


class _Storages:
    """Storages allocated when the pickle names them and filled once it has run."""

    def __init__(self, source, error):
        self.source, self.error = source, error
        self.loaded = {}  # key -> (storage, location)
        self.declared = 0

    def __call__(self, key, storage_type, location, numel):
        if key in self.loaded:
            storage = self.loaded[key][0]
            if storage.dtype is not storage_type.dtype or storage.numel() != numel:
                raise self.error(f"storage {key!r} is named as {numel} elements of {storage_type.dtype} and as "
                                 f"{storage.numel()} of {storage.dtype}")
            return storage
        self.declared += 8 + numel * storage_type.dtype.itemsize
        if self.declared > self.source.remaining():
            raise self.error(f"its storages need at least {self.declared} bytes, more than the "
                             f"{self.source.remaining()} left in the file")
        storage = loom.empty(numel, dtype=storage_type.dtype, device="cpu")
        self.loaded[key] = (storage, location)
        return storage


def load(source, error, restore, weights_only):
    reader = _Reader(source, error)
    magic, _ = unpickler.load(reader.next_pickle("magic number"), None, error, True)
    if magic != MAGIC_NUMBER:
        raise error("its magic number is wrong")
    version, _ = unpickler.load(reader.next_pickle("protocol version"), None, error, True)
    if version != PROTOCOL_VERSION:
        raise error(f"its protocol version is {version!r}, not {PROTOCOL_VERSION}")
    sys_info, _ = unpickler.load(reader.next_pickle("system information"), None, error, True)
    little = sys_info.get("little_endian", True) if isinstance(sys_info, dict) else True
    storages = _Storages(source, error)
    obj, objects = unpickler.load(reader.next_pickle("object"), storages, error, weights_only)
    keys, _ = unpickler.load(reader.next_pickle("list of storages"), None, error, True)
    if (not isinstance(keys, list) or not all(isinstance(k, str) for k in keys)
            or sorted(keys) != sorted(storages.loaded)):
        raise error(f"its list of storages {keys!r:.200} does not match the storages its pickle names")
    order = "<" if little else ">"
    for key in keys:
        storage, location = storages.loaded[key]
        head = source.read(8)
        if len(head) != 8 or struct.unpack(order + "q", head)[0] != storage.numel():
            raise error(f"the bytes of storage {key!r} do not start with its element count {storage.numel()}")
        view = memory.write_view(storage)
        if not source.read_into(view):
            raise error(f"the file ended inside the bytes of storage {key!r}")
        if little != (memory.NATIVE_BYTEORDER == "little"):
            memory.byteswap(storage)
        if storage.dtype is loom.bool and storage.numel() and np.frombuffer(view, np.uint8).max() > 1:
            raise error(f"storage {key!r} of bools holds a byte other than 0 and 1")
        placed = restore(storage, location)
        if placed is not storage:
            for t, base, offset, size, stride in objects.made.values():
                if base is storage:
                    t._set_data(placed._as_strided(size, stride, offset).detach() if t is not storage else placed)
    return obj
